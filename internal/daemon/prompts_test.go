package daemon

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/mcp"
)

type fakeMembers struct{ list []v1alpha1.Member }

func (f *fakeMembers) Members() []v1alpha1.Member { return f.list }
func (f *fakeMembers) Changed() <-chan struct{}   { return make(chan struct{}) }

type recordingSender struct{ sent []messaging.SendRequest }

func (r *recordingSender) Send(_ context.Context, req messaging.SendRequest) (messaging.SendResult, error) {
	r.sent = append(r.sent, req)
	return messaging.SendResult{Outcome: messaging.OutcomeDispatched, TurnID: "t-" + req.To}, nil
}

func member(name, uid, phase, prompt string) v1alpha1.Member {
	return v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name, UID: uid},
		Spec: v1alpha1.MemberSpec{Profile: "claude", Prompt: prompt}, Status: v1alpha1.MemberStatus{Phase: phase}}
}

func TestFirstPrompts_OncePerMemberAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	ms := &fakeMembers{}
	open := func(sender *recordingSender, synced bool) *firstPrompts {
		fp, err := newFirstPrompts(statedir.At(dir).Prompts(), firstPrompts{members: ms, sender: sender, log: slog.New(slog.DiscardHandler),
			synced: func() bool { return synced }})
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
	want := []messaging.SendRequest{{From: mcp.PrimaryName, To: "a", Content: "task a"}}
	if diff := cmp.Diff(want, s1.sent); diff != "" {
		t.Fatalf("sent (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(statedir.At(dir).Prompts()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record file: %v, %v", fi, err)
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

func TestFirstPrompts_DeliveredIntoThePane(t *testing.T) {
	f := startFleet(t, `---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: starter}
spec: {profile: claude, prompt: "Review open PRs"}
`)
	if err := f.sim.WaitCalls(f.ctx, "agent.prompt", 1); err != nil {
		t.Fatal(err)
	}
	var pane string
	err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
		if len(ms) == 1 {
			pane = ms[0].Status.PaneID
		}
		return pane != ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sim.WaitPrompts(f.ctx, pane, 1); err != nil {
		t.Fatal(err)
	}
	if got := f.sim.Prompts(pane); !cmp.Equal(got, []string{"Review open PRs"}) {
		t.Errorf("prompts typed = %q, want the spec's prompt once", got)
	}
}
