package herdrsim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fleetd-dev/fleetd/herdr"
	gocmp "github.com/google/go-cmp/cmp"
)

// A protocol-22 subscription polled as one set (one walk of the events,
// handed to the entries of each kind and pane) sends exactly the lines,
// in exactly the order, of its entries polled one by one — and is lost at
// the same round — whatever the mix of entries and of what happens.
func TestSubSet_SameLinesAsEachEntryPolled(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			checkSubSetAgainstEntries(t, seed)
		})
	}
}

func checkSubSetAgainstEntries(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 26))
	s, err := Start(&Options{InMemory: true, EventRing: 48, Behavior: Behavior{Then: StayWorking}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c := herdr.New(&herdr.Options{Dial: s.Dial})
	ws, err := c.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "w"})
	if err != nil {
		t.Fatal(err)
	}
	var panes []string
	for i := range 8 {
		tab, err := c.CreateTab(ctx, herdr.TabCreateParams{WorkspaceID: ws.Workspace.WorkspaceID, Label: fmt.Sprint("t", i)})
		if err != nil {
			t.Fatal(err)
		}
		p := tab.RootPane.PaneID
		panes = append(panes, p)
		if i < 6 { // two panes never get an agent
			if _, err := c.StartAgent(ctx, herdr.AgentStartParams{Name: fmt.Sprint("a", i), Kind: "codex", PaneID: p}, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	states := []string{stateIdle, stateWorking, stateBlocked}
	for _, p := range panes[:6] {
		if err := s.SetAgentState(p, states[rnd.IntN(len(states))]); err != nil {
			t.Fatal(err)
		}
	}

	kinds := []string{"pane.created", "pane.exited", "pane.updated", "pane.agent_detected", "tab.closed", "pane.closed"}
	filters := []string{"", "idle", "working", "blocked", "done"}
	var specs []subscribeSpec
	for range 4 + rnd.IntN(20) {
		if rnd.IntN(3) == 0 {
			specs = append(specs, subscribeSpec{Type: kinds[rnd.IntN(len(kinds))]})
			continue
		}
		spec := subscribeSpec{Type: "pane.agent_status_changed", PaneID: panes[rnd.IntN(len(panes))]}
		if f := filters[rnd.IntN(len(filters))]; f != "" {
			spec.AgentStatus = &f
		}
		specs = append(specs, spec)
	}
	s.mu.Lock()
	var fast, each []*subscription
	for _, spec := range specs {
		for _, subs := range []*[]*subscription{&fast, &each} {
			sub, aerr, _ := s.newSubscriptionLocked(spec)
			if aerr != nil {
				s.mu.Unlock()
				t.Fatalf("%+v: %v", spec, aerr)
			}
			*subs = append(*subs, sub)
		}
	}
	set := s.newSubSet(fast)
	if !set.indexed {
		s.mu.Unlock()
		t.Fatal("the set of a protocol-22 fake is not indexed")
	}
	one := &subSet{subs: each, polled: make([]int, len(each))} // every entry polled on its own
	for i := range each {
		one.polled[i] = i
	}
	s.mu.Unlock()

	live := map[string]bool{}
	for _, p := range panes {
		live[p] = true
	}
	for round := range 200 {
		// A few changes a round; sometimes more than the ring keeps.
		n := 1 + rnd.IntN(4)
		if rnd.IntN(40) == 0 {
			n = 60
		}
		for range n {
			p := panes[rnd.IntN(len(panes))]
			if !live[p] {
				continue
			}
			if rnd.IntN(25) == 0 {
				if err := s.KillPane(p); err != nil {
					t.Fatal(err)
				}
				live[p] = false
				continue
			}
			s.SetAgentState(p, states[rnd.IntN(len(states))]) // a pane without an agent refuses: nothing happens
		}
		s.mu.Lock()
		got, gotLost := set.poll(s)
		want, wantLost := one.poll(s)
		s.mu.Unlock()
		if gotLost != wantLost {
			t.Fatalf("round %d: lost %v, each entry polled: %v", round, gotLost, wantLost)
		}
		if gotLost {
			return
		}
		if diff := gocmp.Diff(lines(want), lines(got)); diff != "" {
			t.Fatalf("round %d: the set's lines differ from its entries' (-each +set):\n%s", round, diff)
		}
	}
}

func lines(b [][]byte) []string {
	out := make([]string, len(b))
	for i, l := range b {
		out[i] = string(l)
	}
	return out
}
