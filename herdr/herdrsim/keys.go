package herdrsim

import (
	"strings"
	"unicode/utf8"
)

// parseKey checks one key name the way herdr's parse_key_combo accepts it
// (src/config/keybinds.rs) and returns a canonical lower-case form:
// single characters, named keys, named punctuation and modifier chords such
// as "ctrl+c", "C-c" or "shift+tab". Matching is case-insensitive for names.
func parseKey(key string) (string, bool) {
	if utf8.RuneCountInString(key) == 1 {
		return key, true
	}
	k := strings.ToLower(key)
	var mods []string
	for {
		if i := strings.IndexAny(k, "+-"); i > 0 && i < len(k)-1 {
			mod, ok := modifiers[k[:i]]
			if !ok {
				break
			}
			mods = append(mods, mod)
			k = k[i+1:]
			continue
		}
		break
	}
	base, ok := namedKeys[k]
	if !ok {
		if utf8.RuneCountInString(k) != 1 {
			return "", false
		}
		base = k
	}
	if len(mods) == 0 {
		return base, true
	}
	return strings.Join(mods, "+") + "+" + base, true
}

var modifiers = map[string]string{
	"ctrl": "ctrl", "control": "ctrl", "c": "ctrl",
	"alt": "alt", "meta": "alt", "m": "alt", "option": "alt",
	"shift": "shift", "s": "shift",
	"super": "super", "cmd": "super",
}

var namedKeys = func() map[string]string {
	m := map[string]string{"return": "enter", "escape": "esc", "bs": "backspace", "del": "delete", "pgup": "pageup", "pgdn": "pagedown"}
	for _, k := range strings.Fields(`enter esc tab backspace up down left right space home end pageup pagedown
		delete insert backtab minus plus comma period slash backslash semicolon colon quote
		doublequote backquote tilde equal equals underscore pipe bang at hash dollar percent caret
		ampersand asterisk lparen rparen lbracket rbracket lbrace rbrace less greater question`) {
		m[k] = k
	}
	for i := 1; i <= 24; i++ {
		m["f"+itoa(i)] = "f" + itoa(i)
	}
	return m
}()
