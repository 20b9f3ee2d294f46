package fencewatch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/herdr"
)

// Herdr is what the watchdog asks of herdr.
type Herdr interface {
	Snapshot(ctx context.Context) (*herdr.SessionSnapshot, error)
	CloseTab(ctx context.Context, tabID string) error
	SendKeys(ctx context.Context, paneID string, keys []string) error
}

// Dial is herdr at socket, as the watchdog asks it.
func Dial(socket string) Herdr { return herdr.New(&herdr.Options{SocketPath: socket}) }

// Options tune [Serve]; nil means defaults.
type Options struct {
	// Logger receives what the watchdog does; default discards.
	Logger *slog.Logger
	// Now reads the clock of the plans' FireAt; nil is [BootTime].
	Now func() int64
	// CallTimeout bounds each herdr call; 0 is 10 s.
	CallTimeout time.Duration
	// Recheck is how often a waiting watchdog reads Now again (its timer
	// runs on a clock that stops while the machine is suspended); and how
	// soon it tries again when herdr failed it. 0 is 1 s.
	Recheck time.Duration
}

// MaxPlanBytes bounds one plan on the pipe: the names of the members it
// spares, 63 bytes each at most, of a large node.
const MaxPlanBytes = 4 << 20

// Serve is the watchdog: it reads plans from in, one JSON object a line,
// each replacing the last, and carries out the newest at its FireAt,
// once, on h; again only under a plan with another FireAt. It returns nil
// when in ends (its fleetd exited) or ctx ends, and an error for a line
// that is not a plan: the watchdog stops rather than act on a plan it
// misread.
func Serve(ctx context.Context, in io.Reader, h Herdr, opts *Options) error {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = BootTime
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.Recheck == 0 {
		o.Recheck = time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	plans := make(chan Plan)
	ended := make(chan error, 1)
	go func() { ended <- read(ctx, in, plans) }()

	var plan *Plan
	done := false // plan was carried out
	for {
		var wake <-chan time.Time
		stop := func() bool { return false }
		if plan != nil && !done {
			left := time.Duration(plan.FireAt - o.Now())
			if left <= 0 {
				if err := act(ctx, h, *plan, o); err != nil {
					o.Logger.Error("fence watchdog: could not carry out the plan; trying again", "err", err)
				} else {
					done = true
				}
				left = o.Recheck
			}
			if !done {
				t := time.NewTimer(min(left, o.Recheck))
				wake, stop = t.C, t.Stop
			}
		}
		select {
		case p := <-plans:
			if plan == nil || p.FireAt != plan.FireAt {
				done = false
			}
			plan = &p
		case err := <-ended:
			return err
		case <-ctx.Done():
			return nil
		case <-wake:
		}
		stop()
	}
}

// read sends every plan of in to plans until in ends (nil) or a line is
// not a plan (its error).
func read(ctx context.Context, in io.Reader, plans chan<- Plan) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), MaxPlanBytes)
	for n := 1; sc.Scan(); n++ {
		var p Plan
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("fence watchdog: plan %d: %w", n, err)
		}
		if err := p.check(); err != nil {
			return fmt.Errorf("fence watchdog: plan %d: %w", n, err)
		}
		select {
		case plans <- p:
		case <-ctx.Done():
			return nil
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("fence watchdog: reading plans: %w", err)
	}
	return nil
}

// act carries out p: every tab of a member that p does not spare is
// closed, or its working or blocked agents are sent p.Keys.
func act(ctx context.Context, h Herdr, p Plan, o Options) error {
	call, cancel := context.WithTimeout(ctx, o.CallTimeout)
	defer cancel()
	snap, err := h.Snapshot(call)
	if err != nil {
		return fmt.Errorf("read herdr's session: %w", err)
	}
	keep := map[string]bool{}
	for _, name := range p.Keep {
		keep[name] = true
	}
	var errs []error
	for _, t := range snap.Tabs {
		member, ok := strings.CutPrefix(t.Label, p.Prefix)
		if !ok || member == "" || keep[member] {
			continue
		}
		if p.Policy == Close {
			if err := h.CloseTab(call, t.TabID); err != nil {
				errs = append(errs, fmt.Errorf("close tab %s of member %s: %w", t.TabID, member, err))
				continue
			}
			o.Logger.Warn("fence watchdog: closed the tab of a member another node may take over", "member", member, "tab", t.TabID, "why", p.Why)
			continue
		}
		for _, pane := range snap.Panes {
			if pane.TabID != t.TabID || (pane.AgentStatus != herdr.StatusWorking && pane.AgentStatus != herdr.StatusBlocked) {
				continue
			}
			if err := h.SendKeys(call, pane.PaneID, p.Keys); err != nil {
				errs = append(errs, fmt.Errorf("interrupt the agent of pane %s of member %s: %w", pane.PaneID, member, err))
				continue
			}
			o.Logger.Warn("fence watchdog: interrupted the agent of a member another node may take over", "member", member, "pane", pane.PaneID, "why", p.Why)
		}
	}
	return errors.Join(errs...)
}
