package labels

import (
	"fmt"
	"slices"
	"strings"
)

// MaxSelectorBytes bounds a selector.
const MaxSelectorBytes = 4096

type selectorOp int

const (
	opEquals selectorOp = iota
	opNotEquals
	opIn
	opNotIn
	opExists
	opNotExists
)

type requirement struct {
	key    string
	op     selectorOp
	values []string
}

// Selector is a parsed label selector; the empty one matches everything.
type Selector []requirement

// Matches reports whether labels satisfy every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s {
		v, has := labels[r.key]
		var ok bool
		switch r.op {
		case opEquals, opIn:
			ok = has && slices.Contains(r.values, v)
		case opNotEquals, opNotIn:
			ok = !has || !slices.Contains(r.values, v)
		case opExists:
			ok = has
		case opNotExists:
			ok = !has
		}
		if !ok {
			return false
		}
	}
	return true
}

// Parse parses a label selector. Its errors say what is wrong and
// at which byte (1-based).
func Parse(s string) (Selector, error) {
	if len(s) > MaxSelectorBytes {
		return nil, fmt.Errorf("selector is %d bytes; at most %d", len(s), MaxSelectorBytes)
	}
	p := &parser{s: s}
	var sel Selector
	p.space()
	if p.eof() {
		return nil, nil
	}
	for {
		r, err := p.requirement()
		if err != nil {
			return nil, err
		}
		sel = append(sel, r)
		p.space()
		if p.eof() {
			return sel, nil
		}
		if !p.take(",") {
			return nil, p.errorf("want , between requirements")
		}
	}
}

type parser struct {
	s   string
	pos int
}

func (p *parser) eof() bool { return p.pos >= len(p.s) }

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("selector %q, at byte %d: %s", p.s, p.pos+1, fmt.Sprintf(format, args...))
}

func (p *parser) space() {
	for !p.eof() && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

func (p *parser) take(tok string) bool {
	if strings.HasPrefix(p.s[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

// word reads a key or a value: anything up to a space or one of , ( ) ! =.
func (p *parser) word() string {
	start := p.pos
	for !p.eof() && !strings.ContainsRune(" \t,()!=", rune(p.s[p.pos])) {
		if p.s[p.pos] < 0x20 || p.s[p.pos] == 0x7f {
			break
		}
		p.pos++
	}
	return p.s[start:p.pos]
}

func (p *parser) key() (string, error) {
	p.space()
	k := p.word()
	if k == "" {
		return "", p.errorf("want a label key")
	}
	if len(k) > 63 {
		return "", p.errorf("label key %q is longer than 63 characters", k)
	}
	return k, nil
}

func (p *parser) requirement() (requirement, error) {
	if p.take("!") {
		k, err := p.key()
		return requirement{key: k, op: opNotExists}, err
	}
	k, err := p.key()
	if err != nil {
		return requirement{}, err
	}
	p.space()
	switch {
	case p.eof() || p.s[p.pos] == ',':
		return requirement{key: k, op: opExists}, nil
	case p.take("=="), p.take("="):
		return p.single(k, opEquals)
	case p.take("!="):
		return p.single(k, opNotEquals)
	}
	at := p.pos
	switch word := p.word(); word {
	case "in":
		return p.set(k, opIn)
	case "notin":
		return p.set(k, opNotIn)
	default:
		p.pos = at
		return requirement{}, p.errorf("want =, ==, !=, in or notin after %q", k)
	}
}

func (p *parser) single(k string, op selectorOp) (requirement, error) {
	p.space()
	v := p.word()
	if !p.eof() && p.s[p.pos] != ',' && p.s[p.pos] != ' ' && p.s[p.pos] != '\t' {
		return requirement{}, p.errorf("unexpected %q in the value of %q", p.s[p.pos], k)
	}
	return requirement{key: k, op: op, values: []string{v}}, nil
}

func (p *parser) set(k string, op selectorOp) (requirement, error) {
	p.space()
	if !p.take("(") {
		return requirement{}, p.errorf("want ( after in or notin")
	}
	var values []string
	for {
		p.space()
		v := p.word()
		if v == "" {
			return requirement{}, p.errorf("want a value in the set of %q", k)
		}
		values = append(values, v)
		p.space()
		if p.take(")") {
			return requirement{key: k, op: op, values: values}, nil
		}
		if !p.take(",") {
			if p.eof() {
				return requirement{}, p.errorf("want ) to close the values of %q", k)
			}
			return requirement{}, p.errorf("unexpected %q in the values of %q", p.s[p.pos], k)
		}
	}
}
