package etcdstore

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// The snapshot built from the last one and the keys that changed is the
// one built from nothing, through profiles that appear and go (references
// resolved and not), members that claim a branch and give it up, a value
// that stops decoding and is mended, and members deleted.
func TestStore_BuildFromChangesIsBuildFromNothing(t *testing.T) {
	n := startNode(t, nil)
	put := func(key, value string) func() {
		return func() {
			if _, err := n.cli.Put(context.Background(), prefix(t)+key, value); err != nil {
				t.Fatal(err)
			}
		}
	}
	del := func(key string) func() {
		return func() {
			if _, err := n.cli.Delete(context.Background(), prefix(t)+key); err != nil {
				t.Fatal(err)
			}
		}
	}
	memberOf := func(name, profile, branch string) string {
		wt := ""
		if branch != "" {
			wt = fmt.Sprintf(`,"worktree":{"repo":"/srv/api","branch":%q,"cleanup":"Never"}`, branch)
		}
		return fmt.Sprintf(`{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":%q},"spec":{"profile":%q%s}}`, name, profile, wt)
	}
	agents := `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Profile","metadata":{"name":"agents"},"spec":{"harness":"claude","worktree":{"repo":"/srv/api","branchPrefix":"agents"}}}`
	plain := `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Profile","metadata":{"name":"plain"},"spec":{"harness":"claude"}}`
	steps := []struct {
		what   string
		change func()
		// unresolved is how many references or claims are unresolved after it
		unresolved, errs int
	}{
		{"a profile giving a worktree and its member", func() { put("/profiles/agents", agents)(); put("/members/alpha", memberOf("alpha", "agents", ""))() }, 0, 0},
		{"a member of a missing profile", put("/members/beta", memberOf("beta", "plain", "")), 1, 0},
		{"the profile appears", put("/profiles/plain", plain), 0, 0},
		{"a member claims alpha's branch", put("/members/gamma", memberOf("gamma", "plain", "agents/alpha")), 1, 0},
		{"a value that does not decode", put("/members/delta", `{"kind":`), 1, 1},
		{"the value mended", put("/members/delta", memberOf("delta", "plain", "")), 1, 0},
		{"alpha deleted: gamma's branch is its own", del("/members/alpha"), 0, 0},
		{"the profile goes", del("/profiles/plain"), 3, 0},
		{"the profile giving worktrees goes", del("/profiles/agents"), 3, 0},
		{"a member deleted", del("/members/beta"), 2, 0},
	}
	for _, step := range steps {
		step.change()
		n.caughtUp()
		n.st.buildMu.Lock()
		changed := n.st.build()
		kept := n.st.objs
		n.st.objs = objects{}
		whole := n.st.build()
		n.st.objs = kept
		n.st.buildMu.Unlock()
		if !sameObjects(changed, whole) || errorsText(changed.Errors) != errorsText(whole.Errors) || errorsText(changed.Unresolved) != errorsText(whole.Unresolved) {
			t.Errorf("%s: built from the changes\n%s\n%v\nfrom nothing\n%s\n%v", step.what, errorsText(changed.Unresolved), changed.Errors, errorsText(whole.Unresolved), whole.Errors)
		}
		if len(whole.Unresolved) != step.unresolved || len(whole.Errors) != step.errs {
			t.Errorf("%s: %d unresolved, %d errors; want %d and %d: %v %v", step.what, len(whole.Unresolved), len(whole.Errors), step.unresolved, step.errs, whole.Unresolved, whole.Errors)
		}
	}
}

func sameObjects(a, b *store.Snapshot) bool {
	return maps.Equal(a.Members, b.Members) && maps.Equal(a.Profiles, b.Profiles) && maps.Equal(a.Tenants, b.Tenants) && maps.Equal(a.Sources, b.Sources)
}

func errorsText(l decode.ErrorList) string {
	out := ""
	for _, e := range l {
		out += e.Error() + "\n"
	}
	return out
}

// A node's snapshot has the unresolved references of its own members, not
// those of the members bound elsewhere, and follows its bindings as they
// come, move and go.
func TestStore_NodeShowsItsOwnMembersUnresolvedReferences(t *testing.T) {
	a := startNode(t, &Options{Node: "a"})
	for _, name := range []string{"mine", "theirs"} {
		value := fmt.Sprintf(`{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":%q},"spec":{"profile":"missing"}}`, name)
		if _, err := a.cli.Put(context.Background(), prefix(t)+"/members/"+name, value); err != nil {
			t.Fatal(err)
		}
	}
	a.caughtUp()
	a.bind("mine", "a", "")
	a.bind("theirs", "b", "")
	a.caughtUp()
	s := a.st.Snapshot()
	if len(s.Members) != 1 || s.Members["mine"] == nil || len(s.Unresolved) != 1 || s.Unresolved[0].File != prefix(t)+"/members/mine" {
		t.Errorf("a shows %v, unresolved %v; want mine and its reference", memberNamesOf(s), s.Unresolved)
	}
	a.bind("theirs", "a", "")
	s = a.until("theirs moved to a", func(s *store.Snapshot) bool { return s.Members["theirs"] != nil })
	if len(s.Members) != 2 || len(s.Unresolved) != 2 {
		t.Errorf("a shows %v, unresolved %v; want both and both references", memberNamesOf(s), s.Unresolved)
	}
	if _, err := a.cli.Delete(context.Background(), BindingKey(prefix(t), "mine")); err != nil {
		t.Fatal(err)
	}
	s = a.until("mine unbound", func(s *store.Snapshot) bool { return s.Members["mine"] == nil })
	if len(s.Members) != 1 || len(s.Unresolved) != 1 || s.Unresolved[0].File != prefix(t)+"/members/theirs" {
		t.Errorf("a shows %v, unresolved %v; want theirs and its reference", memberNamesOf(s), s.Unresolved)
	}
}
