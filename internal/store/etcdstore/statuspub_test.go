package etcdstore

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// fakeSource is a node's members as the publisher reads them.
type fakeSource struct {
	mu       sync.Mutex
	statuses map[string]PublishedStatus
	changed  chan struct{}
	read     chan struct{} // closed (and replaced) after every Statuses
}

func newFakeSource() *fakeSource {
	return &fakeSource{statuses: map[string]PublishedStatus{}, changed: make(chan struct{}), read: make(chan struct{})}
}

func (f *fakeSource) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fakeSource) Statuses() map[string]PublishedStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.read)
	f.read = make(chan struct{})
	return maps.Clone(f.statuses)
}

// set changes what the node runs and returns a channel closed once the
// publisher has read the change.
func (f *fakeSource) set(edit func(map[string]PublishedStatus)) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	edit(f.statuses)
	close(f.changed)
	f.changed = make(chan struct{})
	return f.read
}

// countingKV counts the transactions (every write the publisher makes).
type countingKV struct {
	clientv3.KV
	txns atomic.Int64
}

func (c *countingKV) Txn(ctx context.Context) clientv3.Txn {
	c.txns.Add(1)
	return c.KV.Txn(ctx)
}

// statusUntil returns once cond holds for what st read of member's
// published status, checked at every change of the statuses.
func statusUntil(t *testing.T, st *Store, member, what string, cond func(PublishedStatus, bool) bool) PublishedStatus {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		ch := st.StatusChanged()
		if s, ok := st.Status(member); cond(s, ok) {
			return s
		}
		select {
		case <-ch:
		case <-deadline.C:
			s, ok := st.Status(member)
			t.Fatalf("%s's status not %s within %s; it is %+v (%v)", member, what, waitLimit, s, ok)
		}
	}
}

func phaseIs(phase, agent string) func(PublishedStatus, bool) bool {
	return func(s PublishedStatus, ok bool) bool {
		return ok && s.Status.Phase == phase && s.Status.AgentStatus == agent
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("not %s within %s", what, waitLimit)
	}
}

// The publisher writes a member's status when it changes, under the
// binding it sees and its node's name; changes within the interval are
// coalesced into one write of the latest; a status that did not change is
// not written; a member the node stops running loses its key; a status the
// node published before a restart for a member it no longer runs is
// deleted.
func TestPublishStatuses_WritesChangesCoalescedAndDeletes(t *testing.T) {
	n := startNode(t, &Options{Node: "a"})
	ctx := context.Background()
	n.apply(profile("claude"))
	n.apply(member("coder", "claude"))
	uid := n.st.Fleet().Members[0].UID
	bind, err := n.cli.Put(ctx, prefix(t)+"/bindings/coder", `{"node":"a","memberUID":"`+uid+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	// Left by this node before a restart, for a member it no longer runs.
	if _, err := n.cli.Put(ctx, prefix(t)+"/status/ghost", `{"node":"a","memberUID":"u-ghost","bindingRevision":1,"status":{"phase":"Ready"}}`); err != nil {
		t.Fatal(err)
	}
	n.until("coder bound here", func(s *store.Snapshot) bool { return s.Members["coder"] != nil })
	// Read before the publisher starts: else "ghost deleted" below holds
	// before the store saw it, and its delete is counted as coder's.
	statusUntil(t, n.st, "ghost", "read", func(_ PublishedStatus, ok bool) bool { return ok })

	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	kv := &countingKV{KV: n.cli.KV}
	src := newFakeSource()
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- PublishStatuses(pctx, kv, n.st, src, &StatusPublisherOptions{Node: "a", Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("PublishStatuses: %v", err)
		}
	})
	statusUntil(t, n.st, "ghost", "deleted", func(_ PublishedStatus, ok bool) bool { return !ok })

	status := func(phase, agent string) func(map[string]PublishedStatus) {
		return func(m map[string]PublishedStatus) {
			m["coder"] = PublishedStatus{MemberUID: uid, Status: v1alpha1.MemberStatus{Phase: phase, AgentStatus: agent, PaneID: "w1:p1"},
				Worker: json.RawMessage(`{"QueueDepth":0}`)}
		}
	}
	src.set(status(v1alpha1.PhaseStarting, ""))
	got := statusUntil(t, n.st, "coder", "Starting", phaseIs(v1alpha1.PhaseStarting, ""))
	if got.Node != "a" || got.MemberUID != uid || got.BindingRevision != bind.Header.Revision || string(got.Worker) != `{"QueueDepth":0}` {
		t.Errorf("published %+v, want node a, uid %s, binding revision %d and the worker state", got, uid, bind.Header.Revision)
	}
	writes := kv.txns.Load() // the ghost's delete and coder's first write

	// A burst of changes (a member starting) is written at once, up to
	// the burst; two more within the interval: one write, of the latest,
	// once the interval has passed.
	for _, agent := range []string{"working", "idle"} {
		src.set(status(v1alpha1.PhaseReady, agent))
		statusUntil(t, n.st, "coder", agent+" at once", phaseIs(v1alpha1.PhaseReady, agent))
	}
	writes += 2
	waitClosed(t, src.set(status(v1alpha1.PhaseReady, "blocked")), "read blocked")
	waitClosed(t, src.set(status(v1alpha1.PhaseReady, "done")), "read done")
	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := kv.txns.Load(); n != writes {
		t.Fatalf("%d writes past the burst before the interval passed, want none", n-writes)
	}
	clk.Step(DefaultStatusInterval)
	statusUntil(t, n.st, "coder", "done", phaseIs(v1alpha1.PhaseReady, "done"))
	if n := kv.txns.Load(); n != writes+1 {
		t.Errorf("%d writes for two changes within the interval, want 1", n-writes)
	}

	// The same status again: nothing written. Then a change: one write.
	clk.Step(DefaultStatusInterval)
	waitClosed(t, src.set(status(v1alpha1.PhaseReady, "done")), "read the same status")
	src.set(status(v1alpha1.PhaseReady, "idle"))
	statusUntil(t, n.st, "coder", "idle", phaseIs(v1alpha1.PhaseReady, "idle"))
	if n := kv.txns.Load(); n != writes+2 {
		t.Errorf("%d writes after an unchanged and a changed status, want 2 in all", n-writes)
	}

	// The node stops running coder: its key goes.
	clk.Step(DefaultStatusInterval)
	src.set(func(m map[string]PublishedStatus) { delete(m, "coder") })
	statusUntil(t, n.st, "coder", "deleted", func(_ PublishedStatus, ok bool) bool { return !ok })
}

// A publisher that finds another node's status at the key, published
// under a newer binding, does not write over it: the member has moved and
// this node has not seen it yet. One under an older binding (a stale
// publisher) is written over.
func TestPublishStatuses_YieldsToANewerBindingsPublisher(t *testing.T) {
	n := startNode(t, &Options{Node: "a"})
	ctx := context.Background()
	n.apply(profile("claude"))
	n.apply(member("coder", "claude"))
	uid := n.st.Fleet().Members[0].UID
	bind, err := n.cli.Put(ctx, prefix(t)+"/bindings/coder", `{"node":"a","memberUID":"`+uid+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	newer := `{"node":"b","memberUID":"` + uid + `","bindingRevision":` + strconv.FormatInt(bind.Header.Revision+100, 10) + `,"status":{"phase":"Ready","agentStatus":"on-b"}}`
	if _, err := n.cli.Put(ctx, prefix(t)+"/status/coder", newer); err != nil {
		t.Fatal(err)
	}
	n.until("coder bound here", func(s *store.Snapshot) bool { return s.Members["coder"] != nil })
	statusUntil(t, n.st, "coder", "b's", phaseIs(v1alpha1.PhaseReady, "on-b"))

	kv := &countingKV{KV: n.cli.KV}
	src := newFakeSource()
	src.set(func(m map[string]PublishedStatus) {
		m["coder"] = PublishedStatus{MemberUID: uid, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, AgentStatus: "on-a"}}
	})
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- PublishStatuses(pctx, kv, n.st, src, &StatusPublisherOptions{Node: "a", Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() { cancel(); <-done })
	// The attempt is made, refused by its fence, and not repeated while
	// the status stays the same, however long.
	deadline := time.Now().Add(waitLimit)
	for kv.txns.Load() < 1 && time.Now().Before(deadline) {
		waitClosed(t, src.set(func(map[string]PublishedStatus) {}), "read")
	}
	for range 3 {
		clk.Step(DefaultStatusInterval)
		waitClosed(t, src.set(func(map[string]PublishedStatus) {}), "read")
	}
	if n := kv.txns.Load(); n != 1 {
		t.Errorf("%d writes over a newer binding's status, want the one refused attempt", n)
	}
	if s, _ := n.st.Status("coder"); s.Node != "b" {
		t.Errorf("coder's status is %+v, want b's still", s)
	}

	// b's status was published under an older binding: written over.
	stale := `{"node":"b","memberUID":"` + uid + `","bindingRevision":1,"status":{"phase":"Ready","agentStatus":"on-b"}}`
	if _, err := n.cli.Put(ctx, prefix(t)+"/status/coder", stale); err != nil {
		t.Fatal(err)
	}
	clk.Step(DefaultStatusInterval)
	src.set(func(m map[string]PublishedStatus) {
		m["coder"] = PublishedStatus{MemberUID: uid, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, AgentStatus: "on-a, later"}}
	})
	got := statusUntil(t, n.st, "coder", "a's", phaseIs(v1alpha1.PhaseReady, "on-a, later"))
	if got.Node != "a" {
		t.Errorf("coder's status %+v, want a's", got)
	}
}

// A value at a status key that does not decode, is oversized or names no
// node shows nothing; the encoder sheds the worker's state, then the
// plan, to keep a record within the bound.
func TestStatus_BadValuesShowNothingAndRecordsStayBounded(t *testing.T) {
	n := startNode(t, &Options{Node: "a"})
	ctx := context.Background()
	big := make([]byte, DefaultMaxStatusBytes)
	for i := range big {
		big[i] = 'x'
	}
	for member, value := range map[string]string{
		"garbage":  "not json",
		"nameless": `{"memberUID":"u","status":{}}`,
		"huge":     `{"node":"a","memberUID":"u","status":{"lastError":"` + string(big) + `"}}`,
		"good":     `{"node":"a","memberUID":"u","bindingRevision":3,"status":{"phase":"Ready"}}`,
	} {
		if _, err := n.cli.Put(ctx, prefix(t)+"/status/"+member, value); err != nil {
			t.Fatal(err)
		}
	}
	statusUntil(t, n.st, "good", "read", phaseIs(v1alpha1.PhaseReady, ""))
	for _, member := range []string{"garbage", "nameless", "huge"} {
		if s, ok := n.st.Status(member); ok {
			t.Errorf("%s shows %+v, want nothing", member, s)
		}
	}

	rec := PublishedStatus{Node: "a", MemberUID: "u", BindingRevision: 1,
		Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, Plan: []v1alpha1.PlanRow{{Server: string(big[:DefaultMaxStatusBytes/2])}}},
		Worker: json.RawMessage(`"` + string(big[:DefaultMaxStatusBytes/2]) + `"`)}
	value := encodeStatus(&rec)
	got, err := decodePublished([]byte(value))
	if err != nil || len(value) > DefaultMaxStatusBytes {
		t.Fatalf("encoded %d bytes (%v), want at most %d", len(value), err, DefaultMaxStatusBytes)
	}
	if got.Worker != nil || got.Status.Plan == nil || got.Status.Phase != v1alpha1.PhaseReady {
		t.Errorf("shrunk record %+v: want the worker's state gone first, the plan and phase kept", got.Status)
	}
}
