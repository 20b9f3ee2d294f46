package multihost

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/mcp"
)

// liveAgents watches every herdr of a fleet, every few milliseconds, for
// a member whose agent runs in two of them at once: two live agents for
// one member.
type liveAgents struct {
	f *hostFleet
	// extra are herdrs of machines outside f (a fleetd run as a process
	// of its own), watched as long as the watch.
	extra   map[string]*herdrsim.Server
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples int
	twice   []string // each moment seen, with when and where
}

func watchLiveAgents(f *hostFleet, extra map[string]*herdrsim.Server) *liveAgents {
	w := &liveAgents{f: f, extra: extra, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			w.sample()
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	f.tb.Cleanup(func() { w.end() })
	return w
}

func (w *liveAgents) sample() {
	where := map[string][]string{}
	for _, h := range w.f.up() { // a killed node's herdr is a dead machine's
		for name := range h.panes() {
			where[name] = append(where[name], h.name)
		}
	}
	for host, srv := range w.extra {
		for name := range herdrPanes(srv) {
			where[name] = append(where[name], host)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	for name, hosts := range where {
		if len(hosts) > 1 && len(w.twice) < 20 {
			w.twice = append(w.twice, fmt.Sprintf("%s on %v at %s", name, hosts, time.Now().Format("15:04:05.000")))
		}
	}
}

// end stops the watch and returns the moments it saw two live agents for
// one member, and how many samples it took.
func (w *liveAgents) end() (twice []string, samples int) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.twice, w.samples
}

// fault applies a fault to every connection of the host's node to etcd.
func (h *fleetHost) fault(apply func(*etcdtest.Proxy)) {
	h.mu.Lock()
	proxies := h.proxies
	h.mu.Unlock()
	for _, p := range proxies {
		apply(p)
	}
}

// The fence (docs/multi-host.md#fencing): a node whose connection to etcd
// fails — a black hole, a half-open connection that takes its requests and
// never answers, a delay longer than its lease — never runs a member at
// the moment another node does. Node a runs a member pinned to it and
// some free ones, b the others; a's connections fail. a holds at once: a
// message for its pinned member is not typed until the fault ends; at its
// fence deadline it closes the panes of its free members (the pinned one
// stays). Where etcd loses a's lease (black hole, delay), b takes those
// members over after the reschedule grace; a half-open connection may
// keep the lease alive for a while (its renewals reach etcd until the
// connection's flow control stops them), and a member etcd never moved
// starts on a again once the fault ends. A watch of both herdrs, every
// 5 ms from before the fault until the fleet converged again, sees no
// member's agent in both.
func TestFence_NeverTwoLiveAgentsForOneMember(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name  string
		apply func(*etcdtest.Proxy)
		moves bool // etcd surely loses a's lease: its free members move to b
	}{
		{"black hole", (*etcdtest.Proxy).BlackHole, true},
		{"half-open", (*etcdtest.Proxy).HalfOpen, false},
		{"delay", func(p *etcdtest.Proxy) { p.Delay(3 * time.Second) }, true},
	}
	for _, fault := range faults {
		t.Run(fault.name, func(t *testing.T) {
			playFence(t, fault.apply, fault.moves)
		})
	}
}

func playFence(t *testing.T, fault func(*etcdtest.Proxy), moves bool) {
	const ttl, rescheduleAfter = 2 * time.Second, 4 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newHostFleet(t, "/fence", []string{"a", "b"}, &hostOptions{Validate: true, NodeTTL: ttl, RescheduleAfter: rescheduleAfter})
	f.waitAllNodesReady(t)
	a, b := f.host("a"), f.host("b")
	if code, resp := b.running().do(t, "POST", "/members", pinned("keep", "a")); code != http.StatusCreated {
		t.Fatalf("POST /members = %d %s", code, resp)
	}
	free := []string{"f1", "f2", "f3", "f4"}
	for _, name := range free {
		b.running().apply(t, name)
	}
	all := append([]string{"keep"}, free...)
	before := f.waitConverged(all...)
	var onA []string
	for _, name := range free {
		if before.ready[name][0].Host == "a" {
			onA = append(onA, name)
		}
	}
	if len(onA) == 0 {
		t.Fatalf("no free member on a: %v", before.ready)
	}
	keepPane := before.ready["keep"][0].Pane
	live := watchLiveAgents(f, nil)
	primary := a.running().primary(t, ctx)

	cut := time.Now()
	a.fault(fault)
	// At a's fence deadline its free members' panes close; keep's stays.
	f.until("a's free members closed", 30*time.Second, func(s fleetState) string {
		for _, name := range onA {
			if slices.ContainsFunc(s.panes[name], func(p string) bool { return strings.HasPrefix(p, "a/") }) {
				return name + " still runs on a"
			}
		}
		return ""
	})
	closed := time.Since(cut)
	if limit := ttl + rescheduleAfter; closed >= limit {
		t.Errorf("a closed its free members %s after the fault; want before another node may take them (%s)", closed, limit)
	}
	// a holds: a message for keep, sent through a's own gateway, is queued
	// and not typed while the fault lasts.
	marks := a.mark()
	out := mustCall[mcp.SendOutput](t, ctx, primary, "bridge_send", map[string]any{"content": "while cut off", "sessionId": "keep", "wait": false})
	if out.Outcome != "dispatched" {
		t.Fatalf("detached bridge_send to keep on a = %+v", out)
	}
	typedToKeep := func() int {
		n := 0
		for _, r := range a.herdr.Requests()[marks:] {
			if r.Method == "agent.prompt" && strings.Contains(string(r.Params), `"target":"keep"`) {
				n++
			}
		}
		return n
	}
	if moves {
		f.until("a's free members on b", 30*time.Second, func(s fleetState) string {
			for _, name := range onA {
				if r := s.ready[name]; len(r) != 1 || r[0].Host != "b" {
					return fmt.Sprintf("%s Ready on %v", name, r)
				}
			}
			return ""
		})
	} else {
		time.Sleep(ttl + rescheduleAfter) // past the grace, whether a's lease lives or not
	}
	if n := typedToKeep(); n != 0 {
		t.Errorf("a typed %d prompts into keep's pane while cut off from etcd", n)
	}

	a.fault((*etcdtest.Proxy).Pass)
	after := f.waitConverged(all...)
	for _, name := range onA {
		if moves && after.ready[name][0].Host != "b" {
			t.Errorf("%s runs on %s after the fault; want b, which took it over", name, after.ready[name][0].Host)
		}
	}
	if got := after.ready["keep"][0]; got.Host != "a" || got.Pane != keepPane {
		t.Errorf("keep (pinned to a) runs on %s in pane %s after the fault; want a, in the pane it had (%s)", got.Host, got.Pane, keepPane)
	}
	deadline := time.Now().Add(20 * time.Second)
	for typedToKeep() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the message for keep was not typed within 20 s after the fault ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	twice, samples := live.end()
	if len(twice) != 0 {
		t.Errorf("two live agents for one member, in %d of %d samples: %v", len(twice), samples, twice)
	}
	t.Logf("%d samples, none with two live agents for one member; a closed its free members %s after the fault began",
		samples, closed.Round(time.Millisecond))
}

// With --fence-policy pause, a node cut off from etcd interrupts (Esc) the
// agents of the members another node may take over, at its fence deadline,
// and keeps their panes: every one of them was interrupted before the
// other node started it (checked at every sample of both herdrs). Once the
// fault ends, the node finds them rebound and closes its idle copies; the
// fleet converges with one agent per member.
func TestFence_PausePolicyInterruptsBeforeAnotherNodeStarts(t *testing.T) {
	t.Parallel()
	const ttl, rescheduleAfter = 2 * time.Second, 4 * time.Second
	f := newHostFleet(t, "/fence-pause", []string{"a", "b"}, &hostOptions{Validate: true, NodeTTL: ttl, RescheduleAfter: rescheduleAfter,
		FencePolicy: controllers.FencePause})
	f.waitAllNodesReady(t)
	a, b := f.host("a"), f.host("b")
	free := []string{"f1", "f2", "f3", "f4"}
	for _, name := range free {
		b.running().apply(t, name)
	}
	before := f.waitConverged(free...)
	paneOnA := map[string]string{}
	for _, name := range free {
		if r := before.ready[name][0]; r.Host == "a" {
			paneOnA[name] = r.Pane
		}
	}
	if len(paneOnA) == 0 {
		t.Fatalf("no member on a: %v", before.ready)
	}
	interrupted := func(pane string) bool {
		for _, r := range a.herdr.Requests() {
			if r.Method == "pane.send_keys" && strings.Contains(string(r.Params), `"pane_id":"`+pane+`"`) && strings.Contains(string(r.Params), `"esc"`) {
				return true
			}
		}
		return false
	}

	a.fault((*etcdtest.Proxy).BlackHole)
	early := map[string]bool{} // started on b before a interrupted it
	f.until("a's members interrupted and running on b", 30*time.Second, func(s fleetState) string {
		for name, pane := range paneOnA {
			// b's panes are read before a's requests: a member on b that
			// a has not interrupted by then was not interrupted first.
			if slices.ContainsFunc(s.panes[name], func(p string) bool { return strings.HasPrefix(p, "b/") }) && !interrupted(pane) {
				early[name] = true
			}
			switch {
			case !slices.Contains(s.panes[name], "a/"+pane):
				return name + "'s pane on a is gone; the pause policy keeps it"
			case !interrupted(pane):
				return name + " not interrupted on a yet"
			case len(s.ready[name]) != 1 || s.ready[name][0].Host != "b":
				return fmt.Sprintf("%s Ready on %v", name, s.ready[name])
			}
		}
		return ""
	})
	if len(early) != 0 {
		t.Errorf("b ran %v while a had not interrupted their agents yet", slices.Sorted(maps.Keys(early)))
	}

	a.fault((*etcdtest.Proxy).Pass)
	after := f.waitConverged(free...) // one pane per member: a closed its copies
	for name := range paneOnA {
		if r := after.ready[name][0]; r.Host != "b" {
			t.Errorf("%s runs on %s after the fault; want b", name, r.Host)
		}
	}
}
