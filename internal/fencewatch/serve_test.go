package fencewatch

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/herdr"
)

// fakeHerdr is a herdr session of tabs and panes that records what the
// watchdog does to it.
type fakeHerdr struct {
	mu    sync.Mutex
	snap  herdr.SessionSnapshot
	fails int // the next calls that fail
	did   []string
}

func newFakeHerdr() *fakeHerdr {
	h := &fakeHerdr{}
	for _, t := range []struct{ tab, label, pane string }{
		{"t1", "fleetd/free", "p1"}, {"t2", "fleetd/pinned", "p2"}, {"t3", "the operator's own", "p3"}, {"t4", "fleetd/busy", "p4"},
	} {
		h.snap.Tabs = append(h.snap.Tabs, herdr.TabInfo{TabID: t.tab, Label: t.label})
		status := herdr.StatusIdle
		if t.tab == "t4" || t.tab == "t2" || t.tab == "t3" {
			status = herdr.StatusWorking
		}
		h.snap.Panes = append(h.snap.Panes, herdr.PaneInfo{PaneID: t.pane, TabID: t.tab, AgentStatus: status})
	}
	return h
}

func (h *fakeHerdr) fail() error {
	if h.fails > 0 {
		h.fails--
		return errors.New("herdr did not answer")
	}
	return nil
}

func (h *fakeHerdr) Snapshot(context.Context) (*herdr.SessionSnapshot, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(); err != nil {
		return nil, err
	}
	s := h.snap
	s.Tabs, s.Panes = slices.Clone(s.Tabs), slices.Clone(s.Panes)
	return &s, nil
}

func (h *fakeHerdr) CloseTab(_ context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(); err != nil {
		return err
	}
	h.did = append(h.did, "close "+id)
	h.snap.Tabs = slices.DeleteFunc(h.snap.Tabs, func(t herdr.TabInfo) bool { return t.TabID == id })
	h.snap.Panes = slices.DeleteFunc(h.snap.Panes, func(p herdr.PaneInfo) bool { return p.TabID == id })
	return nil
}

func (h *fakeHerdr) SendKeys(_ context.Context, pane string, keys []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(); err != nil {
		return err
	}
	h.did = append(h.did, "keys "+pane+" "+strings.Join(keys, ","))
	return nil
}

func (h *fakeHerdr) done() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.did)
}

// watchdog is Serve on a pipe, on the bubble's clock.
type watchdog struct {
	in    *io.PipeWriter
	h     *fakeHerdr
	ended chan error
}

func startWatchdog(t *testing.T, h *fakeHerdr) *watchdog {
	r, w := io.Pipe()
	wd := &watchdog{in: w, h: h, ended: make(chan error, 1)}
	go func() {
		wd.ended <- Serve(context.Background(), r, h, &Options{Now: func() int64 { return time.Now().UnixNano() }})
	}()
	t.Cleanup(func() { w.Close() })
	return wd
}

func (wd *watchdog) arm(t *testing.T, in time.Duration, policy string) {
	t.Helper()
	p := Plan{FireAt: time.Now().Add(in).UnixNano(), Policy: policy, Prefix: "fleetd/", Keep: []string{"pinned"}, Why: "test"}
	if policy == Pause {
		p.Keys = []string{"esc"}
	}
	line, _ := json.Marshal(p)
	if _, err := wd.in.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
}

func TestServe_ClosesEveryMembersTabButThePinnedAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHerdr()
		wd := startWatchdog(t, h)
		wd.arm(t, time.Minute, Close)
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if did := h.done(); len(did) != 0 {
			t.Fatalf("before the deadline the watchdog did %v; want nothing", did)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if diff := cmp.Diff([]string{"close t1", "close t4"}, h.done()); diff != "" {
			t.Errorf("at the deadline (-want +got):\n%s", diff)
		}
		time.Sleep(time.Hour) // once, not again
		synctest.Wait()
		if n := len(h.done()); n != 2 {
			t.Errorf("the watchdog did %v; want each tab closed once", h.done())
		}
		wd.in.Close()
		if err := <-wd.ended; err != nil {
			t.Errorf("Serve = %v once its input ended; want nil", err)
		}
	})
}

func TestServe_ArmedAgainBeforeTheDeadlineDoesNothingThen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHerdr()
		wd := startWatchdog(t, h)
		for range 10 { // a renewal every 20 s moves the deadline on
			wd.arm(t, time.Minute, Close)
			time.Sleep(20 * time.Second)
		}
		synctest.Wait()
		if did := h.done(); len(did) != 0 {
			t.Fatalf("armed again before each deadline, the watchdog did %v; want nothing", did)
		}
		time.Sleep(time.Minute) // no renewal: the last deadline passes
		synctest.Wait()
		if diff := cmp.Diff([]string{"close t1", "close t4"}, h.done()); diff != "" {
			t.Errorf("past the last deadline (-want +got):\n%s", diff)
		}
	})
}

// fleetd exiting — cleanly or killed — ends the watchdog's input: it
// exits without acting, whatever its plan said.
func TestServe_EndsWithItsInputWithoutActing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHerdr()
		wd := startWatchdog(t, h)
		wd.arm(t, time.Minute, Close)
		wd.in.Close()
		if err := <-wd.ended; err != nil {
			t.Errorf("Serve = %v; want nil", err)
		}
		time.Sleep(time.Hour)
		if did := h.done(); len(did) != 0 {
			t.Errorf("after its input ended the watchdog did %v; want nothing", did)
		}
	})
}

func TestServe_PauseInterruptsOnlyWorkingAgentsOfMembersAndKeepsTheirTabs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHerdr()
		wd := startWatchdog(t, h)
		wd.arm(t, time.Second, Pause)
		time.Sleep(time.Second)
		synctest.Wait()
		// free's agent is idle, pinned's is spared, t3 is no member's.
		if diff := cmp.Diff([]string{"keys p4 esc"}, h.done()); diff != "" {
			t.Errorf("at the deadline (-want +got):\n%s", diff)
		}
	})
}

func TestServe_HerdrFailingIsTriedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHerdr()
		h.fails = 3
		wd := startWatchdog(t, h)
		wd.arm(t, time.Second, Close)
		time.Sleep(time.Second)
		synctest.Wait()
		if did := h.done(); len(did) != 0 {
			t.Fatalf("with herdr failing the watchdog did %v", did)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if diff := cmp.Diff([]string{"close t1", "close t4"}, h.done()); diff != "" {
			t.Errorf("once herdr answers (-want +got):\n%s", diff)
		}
	})
}

func TestServe_ALineThatIsNoPlanEndsIt(t *testing.T) {
	for _, line := range []string{
		`not json`,
		`{"fireAt": 1, "policy": "explode", "prefix": "fleetd/"}`,
		`{"fireAt": 1, "policy": "close"}`,
		`{"fireAt": 1, "policy": "pause", "prefix": "fleetd/"}`,
		`{"fireAt": 1, "policy": "close", "prefix": "fleetd/", "extra": true}`,
	} {
		t.Run(line, func(t *testing.T) {
			h := newFakeHerdr()
			err := Serve(t.Context(), strings.NewReader(line+"\n"), h, nil)
			if err == nil || !strings.Contains(err.Error(), "plan 1") {
				t.Errorf("Serve = %v; want the error of plan 1", err)
			}
			if did := h.done(); len(did) != 0 {
				t.Errorf("the watchdog did %v", did)
			}
		})
	}
}
