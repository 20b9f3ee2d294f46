package controllers

import (
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

func TestWriteStatus_SkipsUnchangedStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // condition times from the bubble's clock
		m := &Manager{states: map[string]*memberState{}, runtimes: map[string]*runtime{},
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
