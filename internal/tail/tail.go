package tail

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// Reader reads the end of what a terminal shows as plain text, from the
// visible screen: at most lines lines (0: the whole screen), blank lines at
// the bottom left out. target is a herdr agent target (a pane id).
// herdrprompt.Prompter implements it with [Screen].
type Reader interface {
	ReadTail(ctx context.Context, target string, lines int) (string, error)
}

// Members is where a member's pane is found and what wakes a follower
// (controllers.Manager): WaitFor returns once cond holds for the members,
// re-checking it on every change of their status.
type Members interface {
	Member(name string) (v1alpha1.Member, bool)
	WaitFor(ctx context.Context, cond func([]v1alpha1.Member) bool) error
}

// MaxLines bounds the lines a caller may ask for. herdr's own read limit is
// 1000; a visible screen is far smaller.
const MaxLines = 1000

// DefaultRefresh is how often a follower reads a screen that no herdr event
// woke it for.
const DefaultRefresh = time.Second

// Errors of [Tails.Read] and [Tails.Follow]; they are wrapped with the
// member's name.
var (
	// ErrNotFound: no member of that name (a follower: it was deleted).
	ErrNotFound = errors.New("member not found")
	// ErrNoPane: the member has no pane yet, or none any more (it is
	// pending, failed or being replaced).
	ErrNoPane = errors.New("member has no pane")
	// ErrLines: lines is out of range.
	ErrLines = errors.New("lines out of range")
)

// Options configure [New]; nil means the defaults.
type Options struct {
	// Refresh is how often a follower reads the screen when no herdr event
	// woke it; 0 means [DefaultRefresh].
	Refresh time.Duration
	// Clock times the refresh; nil is the wall clock.
	Clock clock.Clock
}

// Tails reads members' terminals. It is safe for concurrent use.
type Tails struct {
	r       Reader
	m       Members
	refresh time.Duration
	clock   clock.Clock
}

// New returns Tails that read through r and find members in m.
func New(r Reader, m Members, opts *Options) *Tails {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return &Tails{r: r, m: m, refresh: cmp.Or(o.Refresh, DefaultRefresh), clock: o.Clock}
}

// Tail is one read of a member's terminal.
type Tail struct {
	Member string
	PaneID string
	// Lines are the last lines of the screen, oldest first.
	Lines []string
}

// Frame is what a follower emits: lines to show after what it emitted
// before.
type Frame struct {
	// Lines are the new lines, oldest first — or, with Redraw, the whole
	// screen.
	Lines []string
	// Redraw says the screen changed other than by lines added at its
	// bottom (a full-screen agent repainted it, or the member got a new
	// pane): Lines is the whole current screen.
	Redraw bool
	// PaneID is the pane read, set on the first frame and whenever it
	// changed (the member was replaced).
	PaneID string
}

// CheckLines reports whether lines is a valid line count: 0 (the whole
// screen) up to [MaxLines].
func CheckLines(lines int) error {
	if lines < 0 || lines > MaxLines {
		return fmt.Errorf("%w: %d; want 1 to %d, or 0 for the whole screen", ErrLines, lines, MaxLines)
	}
	return nil
}

// Read returns the last lines (0: all) of member name's screen.
func (t *Tails) Read(ctx context.Context, name string, lines int) (Tail, error) {
	if err := CheckLines(lines); err != nil {
		return Tail{}, err
	}
	m, ok := t.m.Member(name)
	if !ok {
		return Tail{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	pane := m.Status.PaneID
	if pane == "" {
		return Tail{}, noPane(m)
	}
	text, err := t.r.ReadTail(ctx, pane, lines)
	if err != nil {
		return Tail{}, err
	}
	return Tail{Member: name, PaneID: pane, Lines: split(text)}, nil
}

func noPane(m v1alpha1.Member) error {
	return fmt.Errorf("%w: %s is %s", ErrNoPane, m.Name, cmp.Or(m.Status.Phase, v1alpha1.PhasePending))
}

// Follow emits member name's screen as it changes until ctx ends (it then
// returns ctx's error), emit fails (its error is returned), or the member
// is deleted (an error matching [ErrNotFound]). The first frame holds the
// last lines lines (0: all) of the screen; after it, what [Next] finds
// between one screen and the next. A member without a pane is waited for;
// a read that fails is tried again at the next wake, except the first,
// whose error Follow returns before emitting anything.
func (t *Tails) Follow(ctx context.Context, name string, lines int, emit func(Frame) error) error {
	if err := CheckLines(lines); err != nil {
		return err
	}
	var (
		screen []string
		pane   string // the pane screen was read from
		first  = true
	)
	for {
		m, ok := t.m.Member(name)
		if !ok {
			return fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		if p := m.Status.PaneID; p != "" {
			text, err := t.r.ReadTail(ctx, p, 0)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case err != nil && first:
				return err
			case err == nil:
				next := split(text)
				var f Frame
				switch {
				case first:
					f.Lines = lastN(next, lines)
				case p != pane:
					f.Lines, f.Redraw = next, true
				default:
					f.Lines, f.Redraw = Next(screen, next)
				}
				if p != pane {
					f.PaneID = p
				}
				send := first || len(f.Lines) > 0 || f.Redraw
				first, screen, pane = false, next, p
				if send {
					if err := emit(f); err != nil {
						return err
					}
				}
			}
		}
		if err := t.wait(ctx, m); err != nil {
			return err
		}
	}
}

// wait returns when herdr reported something for the member (its status as
// the controllers see it changed, or it is gone) or the refresh passed.
func (t *Tails) wait(ctx context.Context, last v1alpha1.Member) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := t.clock.AfterFunc(t.refresh, cancel)
	defer timer.Stop()
	err := t.m.WaitFor(wctx, func(ms []v1alpha1.Member) bool {
		for _, m := range ms {
			if m.Name == last.Name {
				return changed(last.Status, m.Status)
			}
		}
		return true // deleted
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil // a change, or the refresh
}

// changed reports a change of what herdr reports about a member's
// terminal.
func changed(a, b v1alpha1.MemberStatus) bool {
	return a.AgentStatus != b.AgentStatus || a.PaneID != b.PaneID || a.TerminalID != b.TerminalID || a.Phase != b.Phase
}

// Next returns what a follower shows when the screen goes from prev to
// next. When the screen scrolled or grew — the end of prev is the start of
// next — it is the lines after that overlap; prev's last line is allowed to
// have changed (a prompt being typed, a progress line), and is then shown
// again. Any other change is a redraw: the whole of next. Equal screens
// give nothing; after an empty screen, all of next is new.
func Next(prev, next []string) (lines []string, redraw bool) {
	if slices.Equal(prev, next) {
		return nil, false
	}
	if len(prev) == 0 {
		return next, false
	}
	k := overlap(prev, next)
	if len(prev) > 1 {
		k = max(k, overlap(prev[:len(prev)-1], next))
	}
	if k == 0 {
		return next, true
	}
	return next[k:], false
}

// overlap is the length of the longest end of prev that is also the start
// of next.
func overlap(prev, next []string) int {
	for k := min(len(prev), len(next)); k > 0; k-- {
		if slices.Equal(prev[len(prev)-k:], next[:k]) {
			return k
		}
	}
	return 0
}

// split turns a screen's text into lines; no text is no lines.
func split(text string) []string {
	if text == "" {
		return []string{}
	}
	return strings.Split(text, "\n")
}

func lastN(lines []string, n int) []string {
	if n > 0 && len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}
