package fleet

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// statusUntil returns once cond holds for member's published status as s
// reads it, checked at every change of the statuses.
func statusUntil(t *testing.T, s *Statuses, member, what string, cond func(PublishedStatus, bool) bool) PublishedStatus {
	t.Helper()
	var got PublishedStatus
	until(t, member+"'s status "+what, s.Changed, func() bool {
		var ok bool
		got, ok = s.Status(member)
		return cond(got, ok)
	})
	return got
}

func phaseIs(phase, agent string) func(PublishedStatus, bool) bool {
	return func(s PublishedStatus, ok bool) bool {
		return ok && s.Status.Phase == phase && s.Status.AgentStatus == agent
	}
}

// bindHere applies member coder, binds it to node a by hand, and waits
// until st (node a's) shows it; it returns coder's uid and the binding's
// revision.
func bindHere(t *testing.T, f *fixture, st *etcdstore.Store) (uid string, rev int64) {
	t.Helper()
	apply(t, st, "coder")
	m, _ := st.Member("coder")
	rev = f.put("/bindings/coder", `{"node":"a","memberUID":"`+m.UID+`"}`)
	until(t, "coder bound to a", st.Changed, func() bool { return st.Snapshot().Members["coder"] != nil })
	return m.UID, rev
}

// A published status is believed only from the node the member is bound
// to, of the member's uid, under the binding revision this node sees,
// while that node's herdr answers; otherwise BoundStatus says why.
func TestState_BoundStatusBelievesOnlyTheBoundNode(t *testing.T) {
	f := newFixture(t)
	st := f.store("a")
	nodes, statuses := f.nodes(st), f.statuses()
	state := NewState(st, nodes, statuses)
	apply(t, st, "coder")
	b, _, _ := f.register(NodeInfo{Name: "b", Herdr: v1alpha1.NodeHerdr{Reachable: true}}, 0)
	m, _ := st.Member("coder")
	uid := m.UID
	rev := strconv.FormatInt(f.put("/bindings/coder", `{"node":"b","memberUID":"`+uid+`"}`), 10)
	check := func(what, value, want string) {
		t.Helper()
		key := "/status/coder"
		if value == "" {
			key, value = "/status/marker", `{"node":"x","memberUID":"marker","status":{}}`
		}
		at := f.put(key, value)
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := statuses.inf.WaitRevision(ctx, at); err != nil {
			t.Fatal(err)
		}
		// The nodes (b's herdr) and the bindings change elsewhere: judged
		// again at each change of the fleet.
		var pub PublishedStatus
		var why string
		until(t, what+": judged", state.Changed, func() bool {
			fl := state.Fleet()
			pub, why = state.BoundStatus(&fl, fl.Members[0])
			return why == want
		})
		if one, oneWhy, found := state.MemberStatus("coder"); !found || oneWhy != why || cmp.Diff(pub, one) != "" {
			t.Errorf("%s: MemberStatus = %q, %v, (-BoundStatus's +its) %s", what, oneWhy, found, cmp.Diff(pub, one))
		}
		if want == "" && pub.Status.Phase != v1alpha1.PhaseReady {
			t.Errorf("%s: believed %+v", what, pub)
		}
	}
	const notYet = "it has not published its status of this member yet"
	check("nothing published", "", notYet)
	check("another node's", `{"node":"c","memberUID":"`+uid+`","bindingRevision":`+rev+`,"status":{"phase":"Ready"}}`, notYet)
	check("another member's", `{"node":"b","memberUID":"other","bindingRevision":`+rev+`,"status":{"phase":"Ready"}}`, notYet)
	check("under another binding", `{"node":"b","memberUID":"`+uid+`","bindingRevision":1,"status":{"phase":"Ready"}}`, notYet)
	check("the bound node's", `{"node":"b","memberUID":"`+uid+`","bindingRevision":`+rev+`,"status":{"phase":"Ready"}}`, "")
	if err := b.Update(context.Background(), func(i *NodeInfo) { i.Herdr.Reachable = false }); err != nil {
		t.Fatal(err)
	}
	check("its herdr gone", "", "its herdr does not answer, so its status is not known here")
	if _, err := f.cli.Delete(context.Background(), f.prefix+"/bindings/coder"); err != nil {
		t.Fatal(err)
	}
	check("unbound", "", "unbound")
	if _, _, found := state.MemberStatus("nobody"); found {
		t.Error("MemberStatus found a member the store does not hold")
	}
}

// A value at a status key that does not decode, is oversized or names no
// node shows nothing; the encoder sheds the worker's state, then the
// plan, to keep a record within the bound.
func TestStatuses_BadValuesShowNothingAndRecordsStayBounded(t *testing.T) {
	f := newFixture(t)
	statuses := f.statuses()
	big := make([]byte, DefaultMaxStatusBytes)
	for i := range big {
		big[i] = 'x'
	}
	for member, value := range map[string]string{
		"garbage":  "not json",
		"nameless": `{"memberUID":"u","status":{}}`,
		"huge":     `{"node":"a","memberUID":"u","status":{"lastError":"` + string(big) + `"}}`,
	} {
		f.put("/status/"+member, value)
	}
	f.put("/status/good", `{"node":"a","memberUID":"u","bindingRevision":3,"status":{"phase":"Ready"}}`)
	statusUntil(t, statuses, "good", "read", phaseIs(v1alpha1.PhaseReady, ""))
	for _, member := range []string{"garbage", "nameless", "huge"} {
		if s, ok := statuses.Status(member); ok {
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

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("not %s within %s", what, waitLimit)
	}
}

// publish runs PublishStatuses for node a until the test ends.
func (f *fixture) publish(kv clientv3.KV, st *etcdstore.Store, statuses *Statuses, src StatusSource, clk clock.Clock) {
	o := StatusPublisherOptions{Options: *f.opts(), Node: "a"}
	o.Clock = clk
	f.run(func(ctx context.Context) error { return PublishStatuses(ctx, kv, st, statuses, src, &o) })
}

// The publisher writes a member's status when it changes, under the
// binding it sees and its node's name; changes within the interval are
// coalesced into one write of the latest; a status that did not change is
// not written; a member the node stops running loses its key; a status the
// node published before a restart for a member it no longer runs is
// deleted.
func TestPublishStatuses_WritesChangesCoalescedAndDeletes(t *testing.T) {
	f := newFixture(t)
	st, statuses := f.store("a"), f.statuses()
	uid, bindRev := bindHere(t, f, st)
	// Left by this node before a restart, for a member it no longer runs.
	f.put("/status/ghost", `{"node":"a","memberUID":"u-ghost","bindingRevision":1,"status":{"phase":"Ready"}}`)
	// Read before the publisher starts: else "ghost deleted" below holds
	// before the statuses saw it, and its delete is counted as coder's.
	statusUntil(t, statuses, "ghost", "read", func(_ PublishedStatus, ok bool) bool { return ok })

	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	kv := &countingKV{KV: f.cli.KV}
	src := newFakeSource()
	f.publish(kv, st, statuses, src, clk)
	statusUntil(t, statuses, "ghost", "deleted", func(_ PublishedStatus, ok bool) bool { return !ok })

	status := func(phase, agent string) func(map[string]PublishedStatus) {
		return func(m map[string]PublishedStatus) {
			m["coder"] = PublishedStatus{MemberUID: uid, Status: v1alpha1.MemberStatus{Phase: phase, AgentStatus: agent, PaneID: "w1:p1"},
				Worker: json.RawMessage(`{"QueueDepth":0}`)}
		}
	}
	src.set(status(v1alpha1.PhaseStarting, ""))
	got := statusUntil(t, statuses, "coder", "Starting", phaseIs(v1alpha1.PhaseStarting, ""))
	if got.Node != "a" || got.MemberUID != uid || got.BindingRevision != bindRev || string(got.Worker) != `{"QueueDepth":0}` {
		t.Errorf("published %+v, want node a, uid %s, binding revision %d and the worker state", got, uid, bindRev)
	}
	writes := kv.txns.Load() // the ghost's delete and coder's first write

	// A burst of changes (a member starting) is written at once, up to
	// the burst; two more within the interval: one write, of the latest,
	// once the interval has passed.
	for _, agent := range []string{"working", "idle"} {
		src.set(status(v1alpha1.PhaseReady, agent))
		statusUntil(t, statuses, "coder", agent+" at once", phaseIs(v1alpha1.PhaseReady, agent))
	}
	writes += 2
	waitClosed(t, src.set(status(v1alpha1.PhaseReady, "blocked")), "read blocked")
	waitClosed(t, src.set(status(v1alpha1.PhaseReady, "done")), "read done")
	if err := clk.WaitForTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if n := kv.txns.Load(); n != writes {
		t.Fatalf("%d writes past the burst before the interval passed, want none", n-writes)
	}
	clk.Step(DefaultStatusInterval)
	statusUntil(t, statuses, "coder", "done", phaseIs(v1alpha1.PhaseReady, "done"))
	if n := kv.txns.Load(); n != writes+1 {
		t.Errorf("%d writes for two changes within the interval, want 1", n-writes)
	}

	// The same status again: nothing written. Then a change: one write.
	clk.Step(DefaultStatusInterval)
	waitClosed(t, src.set(status(v1alpha1.PhaseReady, "done")), "read the same status")
	src.set(status(v1alpha1.PhaseReady, "idle"))
	statusUntil(t, statuses, "coder", "idle", phaseIs(v1alpha1.PhaseReady, "idle"))
	if n := kv.txns.Load(); n != writes+2 {
		t.Errorf("%d writes after an unchanged and a changed status, want 2 in all", n-writes)
	}

	// The node stops running coder: its key goes.
	clk.Step(DefaultStatusInterval)
	src.set(func(m map[string]PublishedStatus) { delete(m, "coder") })
	statusUntil(t, statuses, "coder", "deleted", func(_ PublishedStatus, ok bool) bool { return !ok })
}

// A publisher that finds another node's status at the key, published
// under a newer binding, does not write over it: the member has moved and
// this node has not seen it yet. One under an older binding (a stale
// publisher) is written over.
func TestPublishStatuses_YieldsToANewerBindingsPublisher(t *testing.T) {
	f := newFixture(t)
	st, statuses := f.store("a"), f.statuses()
	uid, bindRev := bindHere(t, f, st)
	f.put("/status/coder", `{"node":"b","memberUID":"`+uid+`","bindingRevision":`+strconv.FormatInt(bindRev+100, 10)+`,"status":{"phase":"Ready","agentStatus":"on-b"}}`)
	statusUntil(t, statuses, "coder", "b's", phaseIs(v1alpha1.PhaseReady, "on-b"))

	kv := &countingKV{KV: f.cli.KV}
	src := newFakeSource()
	src.set(func(m map[string]PublishedStatus) {
		m["coder"] = PublishedStatus{MemberUID: uid, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, AgentStatus: "on-a"}}
	})
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	f.publish(kv, st, statuses, src, clk)
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
	if s, _ := statuses.Status("coder"); s.Node != "b" {
		t.Errorf("coder's status is %+v, want b's still", s)
	}

	// b's status was published under an older binding: written over.
	f.put("/status/coder", `{"node":"b","memberUID":"`+uid+`","bindingRevision":1,"status":{"phase":"Ready","agentStatus":"on-b"}}`)
	clk.Step(DefaultStatusInterval)
	src.set(func(m map[string]PublishedStatus) {
		m["coder"] = PublishedStatus{MemberUID: uid, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, AgentStatus: "on-a, later"}}
	})
	got := statusUntil(t, statuses, "coder", "a's", phaseIs(v1alpha1.PhaseReady, "on-a, later"))
	if got.Node != "a" {
		t.Errorf("coder's status %+v, want a's", got)
	}
}

// A member's binding written again (the same node and uid, a new
// revision) leaves the node's own snapshot as it was, and the publisher,
// which wakes only for its own members' bindings, still publishes the
// member's status under the new binding; another member's binding does
// not make it write.
func TestPublishStatuses_RepublishesUnderItsMembersNewBinding(t *testing.T) {
	f := newFixture(t)
	st, statuses := f.store("a"), f.statuses()
	uid, bindRev := bindHere(t, f, st)
	kv := &countingKV{KV: f.cli.KV}
	src := newFakeSource()
	f.publish(kv, st, statuses, src, clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	src.set(func(m map[string]PublishedStatus) {
		m["coder"] = PublishedStatus{MemberUID: uid, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, PaneID: "w1:p1"}}
	})
	statusUntil(t, statuses, "coder", "published", func(s PublishedStatus, ok bool) bool { return ok && s.BindingRevision == bindRev })
	writes := kv.txns.Load()

	apply(t, st, "other")
	other, _ := st.Member("other")
	f.put("/bindings/other", `{"node":"b","memberUID":"`+other.UID+`"}`)
	snap := st.Snapshot()
	again := f.put("/bindings/coder", `{"node":"a","memberUID":"`+uid+`"}`)
	statusUntil(t, statuses, "coder", "under the new binding", func(s PublishedStatus, ok bool) bool { return ok && s.BindingRevision == again })
	if st.Snapshot() != snap {
		t.Error("the node's snapshot was published again for bindings that moved no member")
	}
	if n := kv.txns.Load() - writes; n != 1 {
		t.Errorf("%d writes for one member's new binding, want 1", n)
	}
}
