package controllers

import (
	"crypto/sha1"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

func TestSetCondition_TransitionTimeMovesOnlyOnFlip(t *testing.T) {
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	cond := func(status, reason string, at time.Time) v1alpha1.Condition {
		return v1alpha1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, LastTransitionTime: at}
	}
	for _, tc := range []struct {
		name string
		in   []v1alpha1.Condition
		set  v1alpha1.Condition
		want []v1alpha1.Condition
	}{
		{"new condition", nil, cond("True", "A", t2), []v1alpha1.Condition{cond("True", "A", t2)}},
		{"same status keeps time, takes reason", []v1alpha1.Condition{cond("True", "A", t1)}, cond("True", "B", t2),
			[]v1alpha1.Condition{cond("True", "B", t1)}},
		{"flip moves time", []v1alpha1.Condition{cond("True", "A", t1)}, cond("False", "A", t2),
			[]v1alpha1.Condition{cond("False", "A", t2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := setCondition(append([]v1alpha1.Condition(nil), tc.in...), tc.set)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSessionID_StableUUIDPerUID(t *testing.T) {
	a, b := sessionID("uid-1"), sessionID("uid-2")
	if a != sessionID("uid-1") || a == b || len(a) != 36 || a[14] != '5' {
		t.Errorf("session ids %q %q", a, b)
	}
	if sessionID("") != "" {
		t.Error("empty uid got a session id")
	}
}

// A member's session id is what every earlier fleetd derived from its uid:
// agents resume their sessions by it across an upgrade.
func TestSessionID_SameAsEveryEarlierFleetd(t *testing.T) {
	formatted := func(uid string) string { // how fleetd formatted it until 2026-12-03
		h := sha1.Sum([]byte("fleetd-session:" + uid))
		h[6] = h[6]&0x0f | 0x50
		h[8] = h[8]&0x3f | 0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	}
	if got, want := sessionID("uid-1"), "ec9377ee-d856-5180-b7ce-8f1a9610e71f"; got != want {
		t.Errorf("sessionID(uid-1) = %q, want %q", got, want)
	}
	uids := []string{"u", "3f2b9c1e-8a4d-4e6f-9b0a-1c2d3e4f5a6b", strings.Repeat("long-uid-", 20), "é\x00\xff"}
	for i := range 1000 {
		uids = append(uids, fmt.Sprintf("%08x-%d", i*2654435761, i))
	}
	for _, uid := range uids {
		if got, want := sessionID(uid), formatted(uid); got != want {
			t.Errorf("sessionID(%q) = %q, want %q", uid, got, want)
		}
	}
}

// setStatus copies a status as DeepCopyInto does, whatever the status it
// overwrites held, shares nothing with the copied one, and keeps its
// conditions and plan in lists without room to append into (shared).
func TestSetStatus_SameAsDeepCopyWithSharedLists(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	conds := func(n int) []v1alpha1.Condition {
		out := make([]v1alpha1.Condition, n)
		for i := range out {
			out[i] = v1alpha1.Condition{Type: fmt.Sprintf("T%d", i), Status: "True", Reason: "R", LastTransitionTime: at}
		}
		return out
	}
	full := v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, Conditions: conds(5), PaneID: "w1:p1",
		Plan:           []v1alpha1.PlanRow{{}},
		ResumedSession: &v1alpha1.AgentSession{}, Worktree: &v1alpha1.WorktreeStatus{}}
	statuses := map[string]v1alpha1.MemberStatus{
		"zero":                {},
		"no conditions":       {Phase: v1alpha1.PhasePending},
		"empty conditions":    {Conditions: []v1alpha1.Condition{}},
		"one condition":       {Conditions: conds(1)},
		"three in room for 5": {Conditions: conds(5)[:3]},
		"full":                full,
		"empty plan":          {Plan: []v1alpha1.PlanRow{}},
	}
	var lists statusLists
	for dname, dst := range statuses {
		for sname, src := range statuses {
			var want v1alpha1.MemberStatus
			src.DeepCopyInto(&want)
			got := v1alpha1.MemberStatus{}
			setStatus(&got, &dst, &lists)
			setStatus(&got, &src, &lists)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s over %s: got %+v, want %+v", sname, dname, got, want)
			}
			if len(got.Conditions) > 0 && &got.Conditions[0] == &src.Conditions[0] {
				t.Errorf("%s over %s: the copy shares the conditions' array of the status written", sname, dname)
			}
			if cap(got.Conditions) != len(got.Conditions) {
				t.Errorf("%s over %s: the shared conditions have room to append into (cap %d, len %d)", sname, dname, cap(got.Conditions), len(got.Conditions))
			}
			if len(got.Plan) > 0 && &got.Plan[0] == &src.Plan[0] {
				t.Errorf("%s over %s: the copy shares the plan's array of the status written", sname, dname)
			}
			if got.Worktree != nil && got.Worktree == src.Worktree {
				t.Errorf("%s over %s: the copy shares the worktree status", sname, dname)
			}
		}
	}
}

func TestSharedLists_AlikeListsAreKeptOnce(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ready := func(msg string) []v1alpha1.Condition {
		return []v1alpha1.Condition{
			{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue, Reason: "AgentReady", Message: msg, LastTransitionTime: at},
			{Type: v1alpha1.ConditionProgressing, Status: v1alpha1.ConditionFalse, Reason: "AgentReady", LastTransitionTime: at},
		}
	}
	var lists sharedLists[v1alpha1.Condition]
	a, b, c := lists.share(ready("idle")), lists.share(ready("idle")), lists.share(ready("working"))
	if &a[0] != &b[0] {
		t.Error("two members with the same conditions keep a list each")
	}
	if &a[0] == &c[0] {
		t.Error("two members with different conditions share a list")
	}
	for i := range len(lists.recent) { // a's falls out of the recent lists
		lists.share(ready(fmt.Sprint("other ", i)))
	}
	if d := lists.share(ready("idle")); &d[0] == &a[0] || !slices.Equal(d, a) || !slices.Equal(a, ready("idle")) {
		t.Errorf("a list no longer recent: shared again %v, or changed: %+v", &d[0] == &a[0], a)
	}
	if got := lists.share(nil); got != nil {
		t.Errorf("no conditions kept as %v", got)
	}
	if got := lists.share([]v1alpha1.Condition{}); got == nil || len(got) != 0 {
		t.Errorf("an empty list kept as %#v, want an empty one", got)
	}
}

func BenchmarkSessionID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = sessionID("3f2b9c1e-8a4d-4e6f-9b0a-1c2d3e4f5a6b")
	}
}

func TestWriteStatus_SkipsUnchangedStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // condition times from the bubble's clock
		m := &Manager{states: newMemberStates(),
			metrics: NewMetrics(nil), log: discard()}
		m.o.Clock = clock.Real{}
		a := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "a", UID: "uid", Generation: 1}}
		b := m.statusOf(a)
		b.set(v1alpha1.PhaseReady, cTrue("R", ""), cFalse("R", ""), cFalse("R", ""))
		ch := m.Changed()
		m.writeStatus("a", b)
		select {
		case <-ch:
		default:
			t.Fatal("first write did not notify")
		}
		ch = m.Changed()
		b2 := m.statusOf(a)
		b2.set(v1alpha1.PhaseReady, cTrue("R", ""), cFalse("R", ""), cFalse("R", ""))
		m.writeStatus("a", b2)
		select {
		case <-ch:
			t.Error("an unchanged status was written")
		default:
		}
	})
}

// BenchmarkStatus_ReadAndWrite: what a reconcile's status costs, from
// statusOf to a writeStatus that changes it (its Ready condition's reason
// alternates), for a member with its five conditions.
func BenchmarkStatus_ReadAndWrite(b *testing.B) {
	m := &Manager{states: newMemberStates(), promptObjs: map[string]bool{},
		metrics: NewMetrics(nil), log: discard()}
	m.o.Clock = clock.Real{}
	a := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "a", UID: "uid", Generation: 1}}
	reasons := [2]string{"A", "B"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sb := m.statusOf(a)
		sb.set(v1alpha1.PhaseReady, cTrue(reasons[i%2], ""), cFalse("R", ""), cFalse("R", ""))
		sb.cond(v1alpha1.ConditionManifestValid, v1alpha1.ConditionTrue, "R", "")
		sb.cond(v1alpha1.ConditionUpToDate, v1alpha1.ConditionTrue, "R", "")
		m.writeStatus("a", sb)
		i++
	}
}

// A member's runtime shares its entry with its state, but an entry made
// for the runtime alone (a reconcile's, or /metrics' launch digest) shows
// nothing: its status reads as Pending and it has no events, as a member
// without one; a recorded event shows the state, and the runtime it had
// stays; a forgotten member has neither, and its forgetting wakes waiters
// only when it had a state to show.
func TestStates_ARuntimeAloneShowsNoState(t *testing.T) {
	memory, err := loadMemory(nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{states: newMemberStates(), promptObjs: map[string]bool{}, waiting: map[string]string{},
		working: map[string]time.Time{}, asked: map[string]bool{}, memory: memory, metrics: NewMetrics(nil), log: discard()}
	m.o.Clock = clock.Real{}
	alpha := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "alpha", UID: "uid", Generation: 1}}
	status := func() v1alpha1.MemberStatus {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.statusLocked(alpha)
	}
	pending := v1alpha1.MemberStatus{Phase: v1alpha1.PhasePending, SessionID: sessionID("uid")}

	rt := m.runtimeOf("alpha")
	rt.edit().failures = 2
	m.launchHashOf(alpha)
	if diff := cmp.Diff(pending, status()); diff != "" {
		t.Errorf("status with a runtime only (-want +got):\n%s", diff)
	}
	if got := m.MemberEvents("alpha"); got != nil {
		t.Errorf("events with a runtime only: %v", got)
	}
	if m.lastObject("alpha") != nil || m.showsOtherAgentStatus("alpha", "working") {
		t.Error("a runtime alone shows a state")
	}
	ch := m.Changed()
	m.forgetMember("alpha")
	select {
	case <-ch:
		t.Error("forgetting a member with nothing shown woke waiters")
	default:
	}
	if got := m.runtimeOf("alpha"); got == rt || got.peek().failures != 0 {
		t.Errorf("a forgotten member's runtime is kept: %+v", got)
	}

	rt = m.runtimeOf("alpha")
	rt.edit().failures = 2
	m.event("alpha", v1alpha1.EventNormal, "Seen", "seen")
	if got := status(); got.Phase != "" {
		t.Errorf("status after an event = %+v, want the empty status an event's state has", got)
	}
	if got := m.MemberEvents("alpha"); len(got) != 1 || got[0].Reason != "Seen" {
		t.Errorf("events = %+v, want the one recorded", got)
	}
	if got := m.runtimeOf("alpha"); got != rt || got.peek().failures != 2 {
		t.Error("recording an event replaced the member's runtime")
	}
	ch = m.Changed()
	m.forgetMember("alpha")
	select {
	case <-ch:
	default:
		t.Error("forgetting a member with events did not wake waiters")
	}
	if diff := cmp.Diff(pending, status()); diff != "" {
		t.Errorf("status of a forgotten member (-want +got):\n%s", diff)
	}
}

// BenchmarkStates: what finding a member's entry (every reconcile, every
// status read) and adding a new member's cost, at 1000 and 10000 members.
func BenchmarkStates(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		m := &Manager{states: newMemberStates()}
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("member-%05d", 2*i)
			m.runtimeOf(names[i])
		}
		b.Run(fmt.Sprintf("runtimeOf/n=%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				m.runtimeOf(names[i%n])
			}
		})
		b.Run(fmt.Sprintf("add+remove/n=%d", n), func(b *testing.B) {
			name := fmt.Sprintf("member-%05d", n-1) // in the middle
			for b.Loop() {
				m.mu.Lock()
				m.states.Remove(m.entryLocked(name))
				m.mu.Unlock()
			}
		})
	}
}

// A member's events read back as recorded — time (UTC, to the
// nanosecond), type, reason, message — a repeat of the last one bumping
// its count and time, and the oldest dropped past the history's length.
func TestEvents_ReadBackAsRecorded(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 19, 0, 0, 123456789, time.FixedZone("CET", 3600))
	clk := clock.NewFake(t0)
	m := &Manager{states: newMemberStates(), log: discard()}
	m.o.Clock = clk
	if got := m.MemberEvents("alpha"); got != nil {
		t.Fatalf("events before any = %v, want nil", got)
	}
	m.event("alpha", v1alpha1.EventNormal, "Created", "created tab w1:t1")
	clk.Step(time.Second)
	m.event("alpha", v1alpha1.EventWarning, "BackOff", "agent exited")
	clk.Step(time.Second)
	m.event("alpha", v1alpha1.EventWarning, "BackOff", "agent exited")
	want := []v1alpha1.Event{
		{Time: t0.UTC(), Type: v1alpha1.EventNormal, Reason: "Created", Message: "created tab w1:t1", Count: 1},
		{Time: t0.Add(2 * time.Second).UTC(), Type: v1alpha1.EventWarning, Reason: "BackOff", Message: "agent exited", Count: 2},
	}
	if diff := cmp.Diff(want, m.MemberEvents("alpha")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := m.MemberEvents("alpha"); !reflect.DeepEqual(got[0].Time, t0.UTC()) {
		t.Errorf("an event's time reads back as %#v, want %#v", got[0].Time, t0.UTC())
	}
	for i := range DefaultEventHistory {
		m.event("alpha", v1alpha1.EventNormal, "Other", fmt.Sprint("other ", i))
	}
	got := m.MemberEvents("alpha")
	if len(got) != DefaultEventHistory || got[0].Message != "other 0" {
		t.Errorf("%d events, the oldest %+v; want the last %d", len(got), got[0], DefaultEventHistory)
	}
}
