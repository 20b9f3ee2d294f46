package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/mcp"
)

// TestDurability_KillNineMidTraffic runs fleetd as a subprocess against a
// fake herdr owned by the test (so herdr and its agents survive fleetd),
// drives traffic through the gateway, kills fleetd with SIGKILL while a call
// is held and a prompt is half-delivered, restarts it on the same state
// directory and herdr, and checks the promises: queued messages are
// delivered exactly once, in order; the reply in the primary's mailbox is
// still pollable; open turns keep their absolute deadlines; the prompt that
// was mid-delivery is uncertain and never re-sent; the worker that replies
// only after the restart reaches the primary; and the panes are adopted, not
// recreated.
func TestDurability_KillNineMidTraffic(t *testing.T) {
	t.Parallel()
	srv := startHerdr(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "profiles.yaml"), []byte(profileOnly), 0o644); err != nil {
		t.Fatal(err)
	}
	// The first fleetd takes a free port itself (a port found free and
	// closed could be taken by a parallel test before the child binds it);
	// the restart listens where it did.
	cc := childConfig{Manifests: dir, State: t.TempDir(), Listen: "127.0.0.1:0", Herdr: srv.SocketPath(), PickupGrace: 10 * time.Minute}
	first := startChild(t, ctx, cc, "fleetd-1.log")
	tok, err := os.ReadFile(statedir.At(cc.State).PrimaryToken())
	if err != nil {
		t.Fatal(err)
	}
	f := &running{t: t, ctx: ctx, info: Info{URL: first.url, MCPURL: first.url + "/mcp"}, sim: srv, manifests: dir, token: strings.TrimSpace(string(tok))}
	f.primary = f.connect(f.token)

	// slow takes its task and replies only after the restart; busy is in
	// the middle of a turn, so messages for it queue; helper replies to a
	// detached task and then has a prompt cut off mid-delivery.
	slow, busy, helper, burst := f.spawn("slow"), f.spawn("busy"), f.spawn("helper"), f.spawn("burst")
	// From here on fleetd follows every worker's status events: none of
	// the pickups below can go unseen.
	waitSubscribed(t, ctx, srv, 0, slow.pane, busy.pane, helper.pane, burst.pane)

	held := callAsync[mcp.SendOutput](ctx, f.primary, "bridge_send", map[string]any{"content": "long task", "sessionId": "slow", "timeoutMs": 600_000})
	if got := f.prompt(slow); got != "long task" {
		t.Fatalf("slow prompted %q", got)
	}

	// busy picks its first task up (working); while its pickup or its
	// turn lasts, nothing more may be typed, so the next two queue.
	callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "warm-up", "sessionId": "busy", "wait": false})
	if got := f.prompt(busy); got != "warm-up" {
		t.Fatalf("busy prompted %q", got)
	}
	for _, msg := range []string{"queued 1", "queued 2"} {
		callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": msg, "sessionId": "busy", "wait": false, "timeoutMs": 300_000})
	}

	callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "background", "sessionId": "helper", "wait": false})
	f.prompt(helper)
	bg := callOK[mcp.ReplyOutput](f, helper.sess, "bridge_reply", map[string]any{"content": "background done"})
	if bg.Mode != "queued" {
		t.Fatalf("helper's reply = %+v, want queued in the primary's mailbox", bg)
	}
	mailBefore := callOK[mcp.PollOutput](f, f.primary, "bridge_poll", nil).Messages
	if len(mailBefore) != 1 || mailBefore[0].Content != "background done" {
		t.Fatalf("primary's mailbox before the kill = %+v, want helper's reply", mailBefore)
	}

	// The next prompt for helper is typed but herdr never answers: fleetd
	// cannot know whether it went in when it dies.
	srv.InjectFault("agent.prompt", herdrsim.Fault{Execute: true, Hang: true, Times: 1})
	if err := srv.SetAgentStatus(helper.pane, "idle"); err != nil {
		t.Fatal(err)
	}
	cut := callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "cut off", "sessionId": "helper", "wait": false})
	if got := f.prompt(helper); got != "cut off" {
		t.Fatalf("helper prompted %q", got)
	}

	before := callOK[mcp.StatusOutput](f, f.primary, "bridge_status", nil)
	if w := workerStatus(t, before, "busy"); w.QueueDepth != 2 {
		t.Fatalf("busy's queue before the kill = %d, want 2", w.QueueDepth)
	}
	if w := workerStatus(t, before, "slow"); len(w.OpenTurns) != 1 || !w.OpenTurns[0].Waiting {
		t.Fatalf("slow's turns before the kill = %+v, want one with a held call", w.OpenTurns)
	}
	created := srv.Calls()

	// burst is busy too; a flood of sends to it is cut by the kill. Those
	// acknowledged must survive; those cut off may or may not have.
	callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "burst warm-up", "sessionId": "burst", "wait": false})
	f.prompt(burst)
	const flood = 20
	sent := make(chan floodResult, flood)
	for i := range flood {
		go func() {
			content := fmt.Sprintf("flood %02d", i)
			_, err := call[mcp.SendOutput](ctx, f.primary, "bridge_send", map[string]any{"content": content, "sessionId": "burst", "wait": false})
			sent <- floodResult{content, err == nil}
		}()
	}
	var results []floodResult
	for acked := 0; acked < 5; {
		r := recvFlood(t, ctx, sent)
		results = append(results, r)
		if r.acked {
			acked++
		}
	}

	first.kill(t)
	for len(results) < flood {
		results = append(results, recvFlood(t, ctx, sent))
	}
	if _, err := wait(t, ctx, held); err == nil {
		t.Error("the call held on the killed fleetd returned a result")
	}

	since := len(srv.Requests())
	cc.Listen = strings.TrimPrefix(first.url, "http://")
	second := startChild(t, ctx, cc, "fleetd-2.log")
	if second.url != first.url {
		t.Fatalf("restarted on %s, want %s", second.url, first.url)
	}
	f.primary = f.connect(f.token)
	for _, w := range []*worker{slow, busy, helper, burst} {
		w.sess = f.connect(w.token)
	}

	waitSubscribed(t, ctx, srv, since, slow.pane, busy.pane, helper.pane, burst.pane)

	after := callOK[mcp.StatusOutput](f, f.primary, "bridge_status", nil)
	// Open turns keep their ids and absolute deadlines; the held call died
	// with the process.
	for _, name := range []string{"slow", "busy", "helper"} {
		want, got := workerStatus(t, before, name).OpenTurns, workerStatus(t, after, name).OpenTurns
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(mcp.TurnView{}, "Waiting")); diff != "" {
			t.Errorf("%s's open turns across the restart (-before +after):\n%s", name, diff)
		}
	}
	if w := workerStatus(t, after, "slow"); len(w.OpenTurns) != 1 || w.OpenTurns[0].Waiting {
		t.Errorf("slow's turns after the restart = %+v, want one, no call held", w.OpenTurns)
	} else if got := turnSpan(t, w.OpenTurns[0]); got != 600*time.Second {
		t.Errorf("slow's turn deadline is %v after its creation, want the 600 s it was sent with", got)
	}
	for _, turn := range workerStatus(t, after, "busy").OpenTurns[1:] {
		if got := turnSpan(t, turn); got != 300*time.Second {
			t.Errorf("busy's queued turn %s: deadline %v after its creation, want the 300 s it was sent with", turn.TurnID, got)
		}
	}
	if w := workerStatus(t, after, "busy"); w.QueueDepth != 2 {
		t.Errorf("busy's queue after the restart = %d, want 2", w.QueueDepth)
	}
	h := workerStatus(t, after, "helper")
	if len(h.Uncertain) != 1 || h.Uncertain[0].MessageID != cut.DispatchID || h.Uncertain[0].Result != "uncertain" {
		t.Errorf("helper's uncertain deliveries = %+v, want %s", h.Uncertain, cut.DispatchID)
	}
	if h.QueueDepth != 0 {
		t.Errorf("helper's queue = %d, want 0: an uncertain prompt is never queued again", h.QueueDepth)
	}

	// The reply stored before the kill is still there, unacknowledged.
	mailAfter := callOK[mcp.PollOutput](f, f.primary, "bridge_poll", nil).Messages
	if diff := cmp.Diff(mailBefore, mailAfter); diff != "" {
		t.Errorf("primary's mailbox across the restart (-before +after):\n%s", diff)
	}

	// slow replies now, to the turn it was given before the kill.
	late := callOK[mcp.ReplyOutput](f, slow.sess, "bridge_reply", map[string]any{"content": "late result"})
	if late.Mode != "queued" || late.TurnID != before.Workers[indexOf(t, before, "slow")].OpenTurns[0].TurnID {
		t.Errorf("slow's late reply = %+v, want queued for its turn from before the kill", late)
	}
	if got := pollContents(f); !cmp.Equal(got, []string{"background done", "late result"}) {
		t.Errorf("primary's mailbox = %q, want the old reply and slow's late one", got)
	}

	// busy's queue drains one message per turn; a message sent now is the
	// barrier that shows nothing was typed twice before it.
	callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "after restart", "sessionId": "busy", "wait": false})
	for _, want := range []string{"queued 1", "queued 2", "after restart"} {
		if err := srv.SetAgentStatus(busy.pane, "idle"); err != nil {
			t.Fatal(err)
		}
		if got := f.prompt(busy); got != want {
			t.Fatalf("busy prompted %q, want %q", got, want)
		}
	}
	if got := srv.Prompts(busy.pane); !cmp.Equal(got, []string{"warm-up", "queued 1", "queued 2", "after restart"}) {
		t.Errorf("typed into busy = %q, want each message exactly once, in order", got)
	}

	// helper's cut-off prompt is not retried: the next one is typed, and
	// the cut-off one appears once.
	if err := srv.SetAgentStatus(helper.pane, "idle"); err != nil {
		t.Fatal(err)
	}
	callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "next", "sessionId": "helper", "wait": false})
	if got := f.prompt(helper); got != "next" {
		t.Fatalf("helper prompted %q, want next", got)
	}
	if got := srv.Prompts(helper.pane); !cmp.Equal(got, []string{"background", "cut off", "next"}) {
		t.Errorf("typed into helper = %q, want the cut-off prompt once", got)
	}

	// burst's surviving flood drains, one message per turn, each at most
	// once and every acknowledged one exactly once; a barrier sent now
	// comes last, so nothing else was left queued.
	queued := workerStatus(t, after, "burst").QueueDepth
	callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "flood barrier", "sessionId": "burst", "wait": false})
	for range queued + 1 {
		if err := srv.SetAgentStatus(burst.pane, "idle"); err != nil {
			t.Fatal(err)
		}
		f.prompt(burst)
	}
	typed := srv.Prompts(burst.pane)
	if typed[len(typed)-1] != "flood barrier" {
		t.Errorf("last typed into burst = %q, want the barrier", typed[len(typed)-1])
	}
	count := map[string]int{}
	for _, p := range typed {
		count[p]++
	}
	acked := 0
	for _, r := range results {
		switch n := count[r.content]; {
		case n > 1:
			t.Errorf("%q typed %d times", r.content, n)
		case r.acked && n != 1:
			t.Errorf("%q was acknowledged before the kill but typed %d times", r.content, n)
		}
		if r.acked {
			acked++
		}
	}
	if want := 1 + queued + 1; len(typed) != want {
		t.Errorf("typed into burst: %d prompts, want warm-up + %d queued + barrier", len(typed), queued)
	}
	t.Logf("flood: %d of %d acknowledged before the kill, %d queued after the restart", acked, flood, queued)

	// The restarted fleetd adopted the panes: it created nothing.
	for _, method := range []string{"workspace.create", "tab.create", "pane.split", "agent.start"} {
		if n := srv.Calls()[method]; n != created[method] {
			t.Errorf("%s calls: %d before the kill, %d after the restart; want none new", method, created[method], n)
		}
	}
	second.kill(t)
}

func indexOf(t *testing.T, st mcp.StatusOutput, name string) int {
	t.Helper()
	for i, w := range st.Workers {
		if w.Name == name {
			return i
		}
	}
	t.Fatalf("bridge_status has no worker %s: %+v", name, st.Workers)
	return -1
}

func workerStatus(t *testing.T, st mcp.StatusOutput, name string) mcp.WorkerStatusView {
	t.Helper()
	return st.Workers[indexOf(t, st, name)]
}

// pollContents returns the contents of the primary's unacknowledged mail.
func pollContents(f *running) []string {
	f.t.Helper()
	var out []string
	for _, m := range callOK[mcp.PollOutput](f, f.primary, "bridge_poll", nil).Messages {
		out = append(out, m.Content)
	}
	return out
}

// waitSubscribed waits until fleetd has asked herdr (in a request after the
// first since) for the agent status events of every pane in panes, in one
// events.subscribe. A status change from then on reaches it either on that
// stream or through the listing the controllers do after each subscription.
func waitSubscribed(t *testing.T, ctx context.Context, srv *herdrsim.Server, since int, panes ...string) {
	t.Helper()
	for n := 1; ; n++ {
		if err := srv.WaitCalls(ctx, "events.subscribe", n); err != nil {
			t.Fatalf("fleetd never subscribed to the status of %v: %v", panes, err)
		}
		for _, r := range srv.Requests()[since:] {
			if r.Method == "events.subscribe" && coversAll(string(r.Params), panes) {
				return
			}
		}
	}
}

func coversAll(params string, panes []string) bool {
	for _, p := range panes {
		if !strings.Contains(params, fmt.Sprintf("%q", p)) {
			return false
		}
	}
	return true
}

// turnSpan is how long after its creation a turn's deadline falls: both are
// absolute times recorded when the turn was opened.
func turnSpan(t *testing.T, turn mcp.TurnView) time.Duration {
	t.Helper()
	created, err1 := time.Parse(time.RFC3339Nano, turn.CreatedAt)
	deadline, err2 := time.Parse(time.RFC3339Nano, turn.Deadline)
	if err1 != nil || err2 != nil {
		t.Fatalf("turn %s: createdAt %q, deadline %q: %v %v", turn.TurnID, turn.CreatedAt, turn.Deadline, err1, err2)
	}
	return deadline.Sub(created)
}

type floodResult struct {
	content string
	acked   bool // bridge_send returned dispatched before the kill
}

func recvFlood(t *testing.T, ctx context.Context, ch <-chan floodResult) floodResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		t.Fatal("a bridge_send of the flood never returned")
		return floodResult{}
	}
}
