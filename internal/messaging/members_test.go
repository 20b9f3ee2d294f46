package messaging_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// fakeRoster is a desired state the test edits: set replaces the members
// (name → paused) and signals the watchers.
type fakeRoster struct {
	mu       sync.Mutex
	synced   bool
	members  map[string]*v1alpha1.Member
	closing  map[string]bool // panes still open for members it no longer runs
	watchers []chan struct{}
}

func newFakeRoster(members map[string]bool) *fakeRoster {
	s := &fakeRoster{}
	s.set(members)
	return s
}

func (s *fakeRoster) set(members map[string]bool) {
	ms := map[string]*v1alpha1.Member{}
	for name, paused := range members {
		m := &v1alpha1.Member{Spec: v1alpha1.MemberSpec{Profile: "p", Paused: paused}}
		m.Name = name
		ms[name] = m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced, s.members = true, ms
	for _, ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// unsync makes the roster one that has not read its source yet.
func (s *fakeRoster) unsync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced, s.members = false, nil
}

func (s *fakeRoster) Synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

func (s *fakeRoster) Member(name string) *v1alpha1.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members[name]
}

func (s *fakeRoster) Closing(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing[name]
}

// setClosing says which members' panes still run, closing once idle.
func (s *fakeRoster) setClosing(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = map[string]bool{}
	for _, n := range names {
		s.closing[n] = true
	}
}

func (s *fakeRoster) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = append(s.watchers, ch)
	return ch
}

// recordingPrompter accepts every prompt and remembers it.
type recordingPrompter struct {
	mu      sync.Mutex
	prompts []string
}

func (p *recordingPrompter) Prompt(_ context.Context, target, text string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prompts = append(p.prompts, target+": "+text)
	return nil
}

func (p *recordingPrompter) ReadTail(context.Context, string, int) (string, error) { return "", nil }

func (p *recordingPrompter) typed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.prompts...)
}

// membersFixture is a messaging core admitting st's members and a running
// ReportGoneMembers; stop ends both.
type membersFixture struct {
	st   *fakeRoster
	core *messaging.Core
	p    *recordingPrompter
	stop func()
}

func startMembers(t *testing.T, dir string, st *fakeRoster) *membersFixture {
	t.Helper()
	p := &recordingPrompter{}
	core, err := messaging.New(dir, p, &messaging.Options{Admit: messaging.AdmitMembers(st), DefaultTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		messaging.ReportGoneMembers(ctx, st, core)
	}()
	return &membersFixture{st: st, core: core, p: p, stop: func() {
		cancel()
		<-done
		if err := core.Close(); err != nil {
			t.Error(err)
		}
	}}
}

// mailKinds is the primary's mailbox as kind/turn pairs.
func mailKinds(t *testing.T, core *messaging.Core) []string {
	t.Helper()
	msgs, err := core.Poll(context.Background(), "primary", false, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Kind)+" "+m.TurnID)
	}
	return out
}

// TestReportGoneMembers_PausedOrDeletedWithoutPane: a member paused or
// deleted while it has no pane (never observed) fails the call held on it
// with worker_gone and leaves the queued message's notice in the mailbox;
// new messages to it are refused.
func TestReportGoneMembers_PausedOrDeletedWithoutPane(t *testing.T) {
	for _, tc := range []struct {
		name    string
		after   map[string]bool
		refusal messaging.Code
	}{
		{"paused", map[string]bool{"w": true, "other": false}, messaging.CodeWorkerGone},
		{"deleted", map[string]bool{"other": false}, messaging.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := startMembers(t, t.TempDir(), newFakeRoster(map[string]bool{"w": false, "other": false}))
				defer f.stop()
				queued, err := f.core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "w", Content: "queued"})
				if err != nil {
					t.Fatal(err)
				}
				held := make(chan error, 1)
				go func() {
					_, err := f.core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "w", Content: "held", Wait: true})
					held <- err
				}()
				synctest.Wait()
				if got := len(f.core.Status("w").OpenTurns); got != 2 {
					t.Fatalf("open turns to w before: %d, want 2", got)
				}

				f.st.set(tc.after)
				synctest.Wait()
				select {
				case err := <-held:
					if messaging.CodeOf(err) != messaging.CodeWorkerGone {
						t.Fatalf("held send ended with %v, want worker_gone", err)
					}
				default:
					t.Fatal("held send still waiting after w went away")
				}
				if diff := cmp.Diff([]string{"worker_gone " + queued.TurnID}, mailKinds(t, f.core)); diff != "" {
					t.Errorf("primary's mailbox (-want +got):\n%s", diff)
				}
				if st := f.core.Status("w"); len(st.OpenTurns) != 0 || st.QueueDepth != 0 {
					t.Errorf("w still has turns %v, queue %d", st.OpenTurns, st.QueueDepth)
				}
				_, err = f.core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "w", Content: "late"})
				if got := messaging.CodeOf(err); got != messaging.CodeWorkerGone && got != tc.refusal {
					t.Errorf("send to w after: %v, want %s", err, tc.refusal)
				}
				if len(f.core.Status("other").OpenTurns) != 0 || len(f.p.typed()) != 0 {
					t.Errorf("unexpected activity: other %+v, typed %q", f.core.Status("other"), f.p.typed())
				}
			})
		})
	}
}

// TestAdmitMembers refuses messages to names that are not running members,
// with the code the gateway documents, and admits everything before the
// desired state has been read.
func TestAdmitMembers(t *testing.T) {
	st := newFakeRoster(map[string]bool{"run": false, "nap": true})
	admit := messaging.AdmitMembers(st)
	for name, want := range map[string]messaging.Code{"run": "", "nap": messaging.CodeWorkerGone, "nobody": messaging.CodeNotFound} {
		if got := messaging.CodeOf(admit(name)); got != want {
			t.Errorf("admit(%s) = %q, want %q", name, got, want)
		}
	}
	st.unsync()
	if err := admit("nobody"); err != nil {
		t.Errorf("before sync: admit(nobody) = %v, want nil", err)
	}
}

// TestReportGoneMembers_AfterRestart: a member deleted or paused while
// fleetd was down has open turns in the journal; the first pass after the
// restart ends them with worker_gone, and a call held on one again after
// the restart does not wait forever.
func TestReportGoneMembers_AfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after map[string]bool
	}{
		{"deleted", map[string]bool{"keep": false}},
		{"paused", map[string]bool{"w": true, "keep": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				st := newFakeRoster(map[string]bool{"w": false, "keep": false})
				first := startMembers(t, dir, st)
				gone, err := first.core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "w", Content: "task"})
				if err != nil {
					t.Fatal(err)
				}
				kept, err := first.core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "keep", Content: "task"})
				if err != nil {
					t.Fatal(err)
				}
				first.stop()

				st.set(tc.after) // while fleetd is down
				second := startMembers(t, dir, st)
				defer second.stop()
				synctest.Wait()
				if _, err := second.core.Await(context.Background(), "primary", gone.TurnID); messaging.CodeOf(err) != messaging.CodeNotFound {
					t.Errorf("await on w's turn after restart: %v, want not_found (ended)", err)
				}
				if diff := cmp.Diff([]string{"worker_gone " + gone.TurnID}, mailKinds(t, second.core)); diff != "" {
					t.Errorf("primary's mailbox (-want +got):\n%s", diff)
				}
				if got := second.core.Status("keep").OpenTurns; len(got) != 1 || got[0].ID != kept.TurnID {
					t.Errorf("keep's turns after restart: %+v, want %s open", got, kept.TurnID)
				}
			})
		})
	}
}

// TestReportGoneMembers_Unpause: a paused member that comes back takes
// messages again once its new pane is observed, and they are typed into it.
func TestReportGoneMembers_Unpause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := startMembers(t, t.TempDir(), newFakeRoster(map[string]bool{"w": false}))
		defer f.stop()
		if _, err := f.core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "w", Content: "before"}); err != nil {
			t.Fatal(err)
		}
		f.st.set(map[string]bool{"w": true})
		synctest.Wait()
		if !f.core.Status("w").Gone {
			t.Fatal("paused w not reported gone")
		}

		f.st.set(map[string]bool{"w": false})
		synctest.Wait()
		f.core.ObserveStatus("w", messaging.StatusIdle, 1) // its new pane
		res, err := f.core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "w", Content: "after"})
		if err != nil {
			t.Fatalf("send after unpause: %v", err)
		}
		synctest.Wait()
		if diff := cmp.Diff([]string{"w: after"}, f.p.typed()); diff != "" {
			t.Errorf("typed into w (-want +got):\n%s", diff)
		}
		if got := f.core.Status("w").OpenTurns; len(got) != 1 || got[0].ID != res.TurnID {
			t.Errorf("w's turns: %+v, want %s open", got, res.TurnID)
		}
	})
}

// A member deleted or paused while its agent works keeps its pane until
// the agent is idle: nothing reports it gone meanwhile — the call held on
// it keeps waiting and gets the turn's reply — and new messages to it are
// refused with worker_gone, saying its tab is closing. Once the pane is
// gone (the controllers report it), so is the worker.
func TestReportGoneMembers_WaitsForTheClosingPane(t *testing.T) {
	for _, tc := range []struct {
		name    string
		after   map[string]bool
		refusal string
	}{
		{"deleted", map[string]bool{}, "member w was deleted: it takes no new message; its agent finishes what it was given, then its tab closes"},
		{"paused", map[string]bool{"w": true}, "member w is paused: it takes no new message; its agent finishes what it was given, then its tab closes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := startMembers(t, t.TempDir(), newFakeRoster(map[string]bool{"w": false}))
				defer f.stop()
				f.core.ObserveStatus("w", messaging.StatusIdle, 1)
				type sent struct {
					res messaging.SendResult
					err error
				}
				held := make(chan sent, 1)
				go func() {
					res, err := f.core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "w", Content: "task", Wait: true})
					held <- sent{res, err}
				}()
				synctest.Wait()
				f.core.ObserveStatus("w", messaging.StatusWorking, 2) // the agent took the prompt

				f.st.setClosing("w")
				f.st.set(tc.after)
				synctest.Wait()
				select {
				case s := <-held:
					t.Fatalf("the held send ended while w's pane still runs: %+v, %v", s.res, s.err)
				default:
				}
				_, err := f.core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "w", Content: "new"})
				if messaging.CodeOf(err) != messaging.CodeWorkerGone || !strings.Contains(err.Error(), tc.refusal) {
					t.Errorf("a new send to the closing w: %v; want worker_gone saying %q", err, tc.refusal)
				}

				if _, err := f.core.Reply(context.Background(), "w", "done", true); err != nil {
					t.Fatal(err)
				}
				if s := <-held; s.err != nil || s.res.Outcome != messaging.OutcomeReply || s.res.Text != "done" {
					t.Errorf("the held send = %+v, %v; want w's reply", s.res, s.err)
				}
				f.core.ObserveStatus("w", messaging.StatusIdle, 3)
				f.st.setClosing() // its tab closed
				f.core.WorkerGone("w", "deleted")
				if st := f.core.Status("w"); !st.Gone {
					t.Errorf("w after its pane closed: %+v, want gone", st)
				}
			})
		})
	}
}

// Outstanding says what the core holds open for a worker, in words, and
// nothing for an idle worker whose turns ended.
func TestCore_OutstandingSaysWhatIsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := startMembers(t, t.TempDir(), newFakeRoster(map[string]bool{"w": false}))
		defer f.stop()
		ctx := context.Background()
		outstanding := func(want ...string) {
			t.Helper()
			synctest.Wait()
			why, busy := f.core.Outstanding("w")
			if busy != (len(want) > 0) {
				t.Errorf("Outstanding = %q, %v; want busy %v", why, busy, len(want) > 0)
			}
			for _, w := range want {
				if !strings.Contains(why, w) {
					t.Errorf("Outstanding = %q; want it to say %q", why, w)
				}
			}
		}
		outstanding()
		first, err := f.core.Send(ctx, messaging.SendRequest{From: "primary", To: "w", Content: "one"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.core.Send(ctx, messaging.SendRequest{From: "primary", To: "w", Content: "two"}); err != nil {
			t.Fatal(err)
		}
		outstanding("2 messages are queued for it")
		f.core.ObserveStatus("w", messaging.StatusIdle, 1) // "one" is typed
		outstanding("a prompt it was given awaits pickup", "1 message is queued for it")
		f.core.ObserveStatus("w", messaging.StatusWorking, 2)
		outstanding("turn "+first.TurnID+" is open since", "1 message is queued for it")
		asked := make(chan error, 1)
		go func() {
			_, err := f.core.Ask(ctx, "w", "which one?", time.Hour)
			asked <- err
		}()
		outstanding("its question in turn " + first.TurnID + " waits for an answer")
		if _, err := f.core.Send(ctx, messaging.SendRequest{From: "primary", To: "w", TurnID: first.TurnID, Content: "the first"}); err != nil {
			t.Fatal(err)
		}
		if err := <-asked; err != nil {
			t.Fatal(err)
		}
		if _, err := f.core.Reply(ctx, "w", "done", true); err != nil {
			t.Fatal(err)
		}
		f.core.ObserveStatus("w", messaging.StatusIdle, 3) // "two" is typed
		f.core.ObserveStatus("w", messaging.StatusWorking, 4)
		if _, err := f.core.Reply(ctx, "w", "done too", true); err != nil {
			t.Fatal(err)
		}
		f.core.ObserveStatus("w", messaging.StatusIdle, 5)
		outstanding()
	})
}

// Hold, taken by a replacement that found the worker idle, refuses every
// new message to it with worker_gone saying why, and types nothing, until
// released; with something open for the worker it holds nothing and says
// what is open.
func TestCore_HoldRefusesNewMessagesUntilReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := startMembers(t, t.TempDir(), newFakeRoster(map[string]bool{"w": false}))
		defer f.stop()
		ctx := context.Background()
		f.core.ObserveStatus("w", messaging.StatusIdle, 1)
		release, why, busy := f.core.Hold("w", "the profile's rollout replaces the agent")
		if busy || why != "" {
			t.Fatalf("Hold on an idle w = %q, %v; want it held", why, busy)
		}
		_, err := f.core.Send(ctx, messaging.SendRequest{From: "primary", To: "w", Content: "now"})
		if messaging.CodeOf(err) != messaging.CodeWorkerGone || !strings.Contains(err.Error(), "the profile's rollout replaces the agent") {
			t.Errorf("a send to the held w: %v; want worker_gone saying why", err)
		}
		synctest.Wait()
		if got := f.p.typed(); len(got) != 0 {
			t.Errorf("typed into the held w: %q", got)
		}
		release()
		release() // a second release changes nothing
		if _, err := f.core.Send(ctx, messaging.SendRequest{From: "primary", To: "w", Content: "after"}); err != nil {
			t.Fatalf("a send after the release: %v", err)
		}
		synctest.Wait()
		if got := f.p.typed(); len(got) != 1 || !strings.Contains(got[0], "after") {
			t.Errorf("typed after the release: %q; want the new message", got)
		}
		release, why, busy = f.core.Hold("w", "again")
		defer release()
		if !busy || !strings.Contains(why, "awaits pickup") {
			t.Errorf("Hold while a prompt awaits pickup = %q, %v; want busy, saying so", why, busy)
		}
		f.core.ObserveStatus("w", messaging.StatusWorking, 2)
		if _, err := f.core.Send(ctx, messaging.SendRequest{From: "primary", To: "w", Content: "queued"}); err != nil {
			t.Errorf("a send to w after a Hold that held nothing: %v", err)
		}
	})
}
