package messaging

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

type fakeMembers struct{ list []v1alpha1.Member }

func (f *fakeMembers) Members() []v1alpha1.Member { return f.list }
func (f *fakeMembers) Changed() <-chan struct{}   { return make(chan struct{}) }

func (f *fakeMembers) Prompted() []v1alpha1.Member {
	var out []v1alpha1.Member
	for _, m := range f.list {
		if m.Spec.Prompt != "" {
			out = append(out, m)
		}
	}
	return out
}

// syncedRoster is a desired state that has (or has not) been read; the
// first prompts only ask it that.
type syncedRoster bool

func (s syncedRoster) Synced() bool                        { return bool(s) }
func (syncedRoster) Member(string) *v1alpha1.Member        { return nil }
func (syncedRoster) Watch(context.Context) <-chan struct{} { return nil }
func (syncedRoster) Closing(string) bool                   { return false }

// recordingSender records what it is asked; every turn it opened stays
// open and untyped (a worker never idle) until typed[turn] says otherwise.
type recordingSender struct {
	sent  []SendRequest
	typed map[string]bool
	gone  []string
}

func (r *recordingSender) Send(_ context.Context, req SendRequest) (SendResult, error) {
	r.sent = append(r.sent, req)
	return SendResult{Outcome: OutcomeDispatched, TurnID: "t-" + req.To}, nil
}

func (r *recordingSender) Status(name string) WorkerStatus {
	s := WorkerStatus{Worker: name}
	for _, req := range r.sent {
		if req.To == name {
			s.OpenTurns = []TurnStatus{{ID: "t-" + name, Delivered: r.typed["t-"+name]}}
		}
	}
	return s
}

func (r *recordingSender) WorkerGone(name, _ string) { r.gone = append(r.gone, name) }

func member(name, uid, phase, prompt string) v1alpha1.Member {
	return v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name, UID: uid},
		Spec: v1alpha1.MemberSpec{Profile: "claude", Prompt: prompt}, Status: v1alpha1.MemberStatus{Phase: phase}}
}

// stateDB is a state database a test restarts: restart closes it (what it
// staged is written) and opens its file again.
type stateDB struct {
	t    *testing.T
	path string
	db   *statedb.DB
}

func newStateDB(t *testing.T) *stateDB {
	s := &stateDB{t: t, path: statedir.At(t.TempDir()).StateDB()}
	s.restart()
	t.Cleanup(func() { s.db.Close() })
	return s
}

func (s *stateDB) restart() *statedb.DB {
	s.t.Helper()
	if err := s.db.Close(); err != nil {
		s.t.Fatal(err)
	}
	db, err := statedb.Open(s.path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	s.db = db
	return db
}

func TestFirstPrompts_OncePerMemberAcrossRestarts(t *testing.T) {
	state := newStateDB(t)
	ms := &fakeMembers{}
	open := func(sender *recordingSender, synced bool) *FirstPrompts {
		fp, err := NewFirstPrompts(state.restart(), ms, syncedRoster(synced), sender, &FirstPromptsOptions{From: "@primary"})
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	ctx := context.Background()
	s1 := &recordingSender{}
	fp := open(s1, true)

	ms.list = []v1alpha1.Member{member("a", "uid-a", v1alpha1.PhaseStarting, "task a"), member("b", "uid-b", v1alpha1.PhaseReady, "")}
	fp.deliver(ctx)
	if len(s1.sent) != 0 {
		t.Fatalf("sent %+v before a was Ready or to a member without prompt", s1.sent)
	}
	ms.list[0].Status.Phase = v1alpha1.PhaseReady
	fp.deliver(ctx)
	fp.deliver(ctx)
	want := []SendRequest{{From: "@primary", To: "a", Content: "task a"}}
	if diff := cmp.Diff(want, s1.sent); diff != "" {
		t.Fatalf("sent (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(state.path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state database: %v, %v", fi, err)
	}

	// A restart (before the manifests are read, then after) does not resend.
	s2 := &recordingSender{}
	fp2 := open(s2, false)
	ms.list, fp2.members = nil, ms
	fp2.deliver(ctx)
	ms.list = []v1alpha1.Member{member("a", "uid-a", v1alpha1.PhaseReady, "task a")}
	fp2.deliver(ctx)
	if len(s2.sent) != 0 {
		t.Fatalf("resent after a restart: %+v", s2.sent)
	}

	// The same name with a new uid is a new member and gets its prompt.
	s3 := &recordingSender{}
	fp3 := open(s3, true)
	ms.list = []v1alpha1.Member{member("a", "uid-a2", v1alpha1.PhaseReady, "task a")}
	fp3.deliver(ctx)
	if len(s3.sent) != 1 {
		t.Fatalf("recreated member got %d prompts, want 1", len(s3.sent))
	}
	if _, ok := fp3.done["uid-a"]; ok {
		t.Error("the record of a deleted member was kept")
	}
}

// TestFirstPrompts_DefaultsAndUnreadableRecord: without options the prompt
// comes from the core's default primary name, and a record that is not a
// delivery stops the start with an error naming the member's uid.
func TestFirstPrompts_DefaultsAndUnreadableRecord(t *testing.T) {
	state := newStateDB(t)
	s := &recordingSender{}
	fp, err := NewFirstPrompts(state.db, &fakeMembers{list: []v1alpha1.Member{member("a", "uid-a", v1alpha1.PhaseReady, "task")}}, syncedRoster(true), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	fp.deliver(context.Background())
	if len(s.sent) != 1 || s.sent[0].From != (&Options{}).withDefaults().PrimaryName {
		t.Errorf("sent %+v, want one prompt from the core's default primary", s.sent)
	}
	if err := state.db.Write(statedb.Put(statedb.Prompts, "uid-z", []byte("[1]"))); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFirstPrompts(state.db, &fakeMembers{}, syncedRoster(true), s, nil); err == nil || !strings.Contains(err.Error(), "uid-z") {
		t.Errorf("NewFirstPrompts on a corrupt record = %v, want an error naming uid-z", err)
	}
}

// TestFirstPrompts_OwedUntilTyped: a first prompt the core dropped with the
// member's pane before typing it (the member was replaced right after it
// became Ready) is sent again once the member is Ready in its next pane —
// not while the status still shows the old pane — and only once; a prompt
// that was typed is not sent again when its pane goes.
func TestFirstPrompts_OwedUntilTyped(t *testing.T) {
	state := newStateDB(t)
	ready := func(pane string) []v1alpha1.Member {
		m := member("a", "uid-a", v1alpha1.PhaseReady, "task a")
		m.Status.PaneID = pane
		return []v1alpha1.Member{m}
	}
	ms := &fakeMembers{list: ready("w1:p1")}
	s := &recordingSender{typed: map[string]bool{}}
	fp, err := NewFirstPrompts(state.db, ms, syncedRoster(true), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fp.deliver(ctx)
	fp.WorkerGone("a", "w1:p1", "replaced")
	if !cmp.Equal(s.gone, []string{"a"}) {
		t.Fatalf("the core was told %q gone, want a", s.gone)
	}
	fp.deliver(ctx) // the status still shows the pane that went away
	if len(s.sent) != 1 {
		t.Fatalf("sent %d prompts before the member was Ready in a new pane, want 1", len(s.sent))
	}
	// A restart now must not forget that the prompt is owed.
	fp, err = NewFirstPrompts(state.restart(), ms, syncedRoster(true), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	ms.list = ready("w2:p1")
	fp.deliver(ctx)
	fp.deliver(ctx)
	if len(s.sent) != 2 || s.sent[1].Content != "task a" {
		t.Fatalf("sent %+v, want the prompt again, once, in the new pane", s.sent)
	}
	s.typed["t-a"] = true
	fp.WorkerGone("a", "w2:p1", "replaced")
	ms.list = ready("w3:p1")
	fp.deliver(ctx)
	if len(s.sent) != 2 {
		t.Errorf("a typed prompt was sent again after its pane went: %+v", s.sent)
	}
}

// A changed spec.prompt is a new first task: delivered once to the member
// (by uid) when it is Ready, after a restart too, and never again for the
// same text; a record an older fleetd wrote (a bare turn id) stands for
// the prompt the member has when it is first read.
func TestFirstPrompts_ChangedPromptIsDeliveredOnce(t *testing.T) {
	state := newStateDB(t)
	if err := state.db.Write(statedb.Put(statedb.Prompts, "uid-old", []byte(`"t-7"`))); err != nil {
		t.Fatal(err)
	}
	ms := &fakeMembers{list: []v1alpha1.Member{member("a", "uid-a", v1alpha1.PhaseReady, "first"), member("old", "uid-old", v1alpha1.PhaseReady, "legacy")}}
	open := func(s *recordingSender) *FirstPrompts {
		fp, err := NewFirstPrompts(state.restart(), ms, syncedRoster(true), s, nil)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	ctx := context.Background()
	s := &recordingSender{}
	fp := open(s)
	fp.deliver(ctx)
	ms.list[0].Spec.Prompt = "second"
	fp.deliver(ctx)
	fp.deliver(ctx)
	want := []SendRequest{{From: DefaultPrimaryName, To: "a", Content: "first"}, {From: DefaultPrimaryName, To: "a", Content: "second"}}
	if diff := cmp.Diff(want, s.sent); diff != "" {
		t.Fatalf("sent (-want +got):\n%s", diff)
	}

	// After a restart: nothing again; the legacy member's next change is
	// delivered.
	s2 := &recordingSender{}
	fp2 := open(s2)
	fp2.deliver(ctx)
	ms.list[1].Spec.Prompt = "legacy, changed"
	fp2.deliver(ctx)
	want = []SendRequest{{From: DefaultPrimaryName, To: "old", Content: "legacy, changed"}}
	if diff := cmp.Diff(want, s2.sent); diff != "" {
		t.Errorf("sent after the restart (-want +got):\n%s", diff)
	}
}

// A member whose prompt was delivered and then removed keeps its record
// while it exists — the same prompt given back is not a new task — and
// loses it once it is deleted.
func TestFirstPrompts_RecordKeptUntilTheMemberIsDeleted(t *testing.T) {
	state := newStateDB(t)
	ms := &fakeMembers{list: []v1alpha1.Member{member("a", "uid-a", v1alpha1.PhaseReady, "task")}}
	s := &recordingSender{}
	fp, err := NewFirstPrompts(state.db, ms, syncedRoster(true), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fp.deliver(ctx)
	ms.list[0].Spec.Prompt = ""
	fp.deliver(ctx)
	ms.list[0].Spec.Prompt = "task"
	fp.deliver(ctx)
	if len(s.sent) != 1 {
		t.Fatalf("sent %d prompts, want the first only: the prompt given back is the one delivered", len(s.sent))
	}
	ms.list = nil
	fp.deliver(ctx)
	if _, ok := fp.done["uid-a"]; ok {
		t.Error("the record of a deleted member was kept")
	}
}
