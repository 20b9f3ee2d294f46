package quota

import (
	"errors"
	"testing"
)

// step is one Acquire (or, with release set, the release of the slot
// taken by step release-1) and what it must give.
type step struct {
	caller     string
	privileged bool
	release    int
	want       Scope // 0: granted
}

func TestQuota_BoundsEachCallerAllOrdinaryCallersAndTheWhole(t *testing.T) {
	limits := Limits{PerCaller: 2, Total: 5, Reserved: 2} // ordinary callers together: 3
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "a caller's own bound",
		steps: []step{{caller: "w1"}, {caller: "w1"}, {caller: "w1", want: ScopeCaller},
			{caller: "w2"}}, // another caller is not refused for it
	}, {
		name: "workers together never take the primary's reserve",
		steps: []step{{caller: "w1"}, {caller: "w1"}, {caller: "w2"}, {caller: "w3", want: ScopeShared},
			{caller: "p", privileged: true}, {caller: "p", privileged: true}, // the reserve
			{caller: "p", privileged: true, want: ScopeShared}}, // the whole is full
	}, {
		name: "the primary may use the whole",
		steps: []step{{caller: "p", privileged: true}, {caller: "p", privileged: true}, {caller: "p", privileged: true},
			{caller: "p", privileged: true}, {caller: "p", privileged: true}, {caller: "p", privileged: true, want: ScopeShared},
			{caller: "w1", want: ScopeShared}},
	}, {
		name: "a released slot is taken again, once",
		steps: []step{{caller: "w1"}, {caller: "w1"}, {caller: "w1", want: ScopeCaller},
			{release: 1}, {release: 1}, // twice: the second does nothing
			{caller: "w1"}, {caller: "w1", want: ScopeCaller}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := New(limits)
			if err != nil {
				t.Fatal(err)
			}
			releases := map[int]func(){}
			for i, s := range tt.steps {
				if s.release > 0 {
					releases[s.release-1]()
					continue
				}
				rel, err := q.Acquire(s.caller, s.privileged)
				var ee *ExceededError
				switch {
				case s.want == 0 && err != nil:
					t.Fatalf("step %d: Acquire(%s) = %v, want a slot", i, s.caller, err)
				case s.want == 0:
					releases[i] = rel
				case !errors.As(err, &ee) || ee.Scope != s.want || !errors.Is(err, ErrExceeded):
					t.Fatalf("step %d: Acquire(%s) = %v, want a refusal of scope %d", i, s.caller, err, s.want)
				}
			}
		})
	}
}

func TestNew_RefusesBoundsThatMakeNoSense(t *testing.T) {
	for _, l := range []Limits{{Total: 0}, {Total: 4, Reserved: 5}, {Total: 4, PerCaller: -1}, {Total: 4, Reserved: -1}} {
		if _, err := New(l); err == nil {
			t.Errorf("New(%+v) = nil error", l)
		}
	}
}

func TestNilQuota_BoundsNothing(t *testing.T) {
	var q *Quota
	for range 100 {
		if _, err := q.Acquire("w1", false); err != nil {
			t.Fatalf("nil quota refused: %v", err)
		}
	}
}
