package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/mcpbridge"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/mcp"
)

// The end-to-end tests run a whole daemon on the simulated herdr and talk
// to it over real HTTP with go-sdk clients: the primary with the token from
// primary.token, each worker with the FLEETD_TOKEN the fake herdr recorded
// in that worker's pane environment. Fake agents are scripted so that a
// prompt is reported on a channel and the agent goes working (picked up);
// tests end turns by setting the agent's status. Nothing sleeps: tests wait
// on channels, on the controller's status notifications and on the fake's
// call counters. Every wait is bounded by testCtx so a bug fails instead of
// hanging.

const profileOnly = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude, description: Claude Code worker, env: {SECRET_SETTING: do-not-show}}
`

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// running is a running daemon with a connected primary.
type running struct {
	t         *testing.T
	ctx       context.Context
	info      Info
	sim       *herdrsim.Server
	manifests string
	primary   *sdk.ClientSession
	token     string // the primary's
}

func startFleet(t *testing.T, extraManifests string) *running {
	t.Helper()
	// A pickup grace longer than any test: a second message may only go in
	// once the agent was seen picking up the first.
	return startFleetWith(t, extraManifests, &messaging.Options{PickupGrace: 10 * time.Minute})
}

// protocols are the herdr protocols the end-to-end scenarios run on: 22
// (herdr 0.9, what people run and the simulation's default) and 20 (herdr
// 0.8.2).
var protocols = []int{herdrsim.DefaultProtocol, herdrsim.Protocol20}

// eachProtocol runs a scenario once per herdr protocol, as the subtests
// "protocol22" and "protocol20".
func eachProtocol(t *testing.T, scenario func(t *testing.T, protocol int)) {
	t.Helper()
	for _, p := range protocols {
		t.Run(fmt.Sprintf("protocol%d", p), func(t *testing.T) { scenario(t, p) })
	}
}

// startFleetOn is startFleet on a simulated herdr speaking protocol.
func startFleetOn(t *testing.T, protocol int) *running {
	t.Helper()
	return startFleetConfig(t, "", Config{SimProtocol: protocol, Messaging: &messaging.Options{PickupGrace: 10 * time.Minute}})
}

func startFleetWith(t *testing.T, extraManifests string, mopts *messaging.Options) *running {
	t.Helper()
	return startFleetConfig(t, extraManifests, Config{Messaging: mopts})
}

// startFleetConfig is startFleetWith for a daemon with more of cfg set;
// the directories, listener and herdr are the test's.
func startFleetConfig(t *testing.T, extraManifests string, cfg Config) *running {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "profiles.yaml"), []byte(profileOnly+extraManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	cfg.ManifestsDir, cfg.StateDir = dir, stateDir
	info, _ := runDaemon(t, cfg)
	tok, err := os.ReadFile(statedir.At(stateDir).PrimaryToken())
	if err != nil {
		t.Fatal(err)
	}
	f := &running{t: t, ctx: testCtx(t), info: info, sim: info.Sim, manifests: dir, token: strings.TrimSpace(string(tok))}
	f.primary = f.connect(f.token)
	return f
}

func (f *running) connectTo(url, token string) (*sdk.ClientSession, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	bt, err := mcpbridge.NewBearerTransport(url, token, nil)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: bt}
	return client.Connect(f.ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
}

func (f *running) connect(token string) *sdk.ClientSession {
	f.t.Helper()
	s, err := f.connectTo(f.info.MCPURL, token)
	if err != nil {
		f.t.Fatalf("connect to the gateway: %v", err)
	}
	f.t.Cleanup(func() { s.Close() })
	return s
}

// worker is a spawned member whose fake agent reports its prompts.
type worker struct {
	name, pane string
	token      string // FLEETD_TOKEN from its pane's env
	sess       *sdk.ClientSession
	prompts    chan string
}

// spawn creates a worker through bridge_spawn, scripts its agent and
// connects its MCP client with the token and URL from its pane's env.
func (f *running) spawn(name string) *worker {
	f.t.Helper()
	view, terr := call[mcp.SpawnOutput](f.ctx, f.primary, "bridge_spawn", map[string]any{"profile": "claude", "name": name})
	if terr != nil {
		f.t.Fatalf("bridge_spawn %s: %v", name, terr)
	}
	if view.Phase != v1alpha1.PhaseReady || view.PaneID == "" || view.Result != "created" {
		f.t.Fatalf("bridge_spawn %s = %+v, want a created Ready member with a pane", name, view)
	}
	w := &worker{name: name, pane: view.PaneID, prompts: make(chan string, 16)}
	f.sim.SetBehavior(w.pane, herdrsim.Behavior{OnPrompt: func(pane, text string) {
		f.sim.SetAgentStatus(pane, "working")
		w.prompts <- text
	}})
	env, ok := f.sim.PaneEnv(w.pane)
	if !ok || env["FLEETD_TOKEN"] == "" {
		f.t.Fatalf("pane %s has no FLEETD_TOKEN in its env", w.pane)
	}
	if env["FLEETD_URL"] != f.info.MCPURL {
		f.t.Errorf("pane FLEETD_URL = %q, want %q", env["FLEETD_URL"], f.info.MCPURL)
	}
	w.token = env["FLEETD_TOKEN"]
	w.sess = f.connect(w.token)
	return w
}

// prompt waits for w's agent to be prompted.
func (f *running) prompt(w *worker) string {
	f.t.Helper()
	select {
	case p := <-w.prompts:
		return p
	case <-f.ctx.Done():
		f.t.Fatalf("%s was never prompted", w.name)
		return ""
	}
}

// setStatus makes w's agent report status and waits until fleetd has seen
// it (the controllers feed the messaging core before they update status).
func (f *running) setStatus(w *worker, status string) {
	f.t.Helper()
	if err := f.sim.SetAgentStatus(w.pane, status); err != nil {
		f.t.Fatal(err)
	}
	err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
		for _, m := range ms {
			if m.Name == w.name {
				return m.Status.AgentStatus == status
			}
		}
		return false
	})
	if err != nil {
		f.t.Fatalf("fleetd never saw %s %s: %v", w.name, status, err)
	}
}

// call calls a tool and decodes its structured result or tool error.
func call[Out any](ctx context.Context, s *sdk.ClientSession, tool string, args map[string]any) (Out, *mcp.ToolError) {
	var out Out
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return out, &mcp.ToolError{Code: "protocol", Message: err.Error()}
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if res.IsError {
		var te mcp.ToolError
		if err := json.Unmarshal(raw, &te); err != nil || te.Code == "" {
			return out, &mcp.ToolError{Code: "undecodable", Message: string(raw)}
		}
		if text := res.Content[0].(*sdk.TextContent).Text; text != te.Code+": "+te.Message {
			return out, &mcp.ToolError{Code: "bad_text", Message: text}
		}
		return out, &te
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, &mcp.ToolError{Code: "undecodable", Message: string(raw)}
	}
	return out, nil
}

type result[T any] struct {
	out T
	err *mcp.ToolError
}

// callAsync calls a tool in a goroutine; the channel gets its result.
func callAsync[Out any](ctx context.Context, s *sdk.ClientSession, tool string, args map[string]any) <-chan result[Out] {
	ch := make(chan result[Out], 1)
	go func() {
		out, err := call[Out](ctx, s, tool, args)
		ch <- result[Out]{out, err}
	}()
	return ch
}

func wait[T any](t *testing.T, ctx context.Context, ch <-chan result[T]) (T, *mcp.ToolError) {
	t.Helper()
	select {
	case r := <-ch:
		return r.out, r.err
	case <-ctx.Done():
		t.Fatal("call did not return")
		var zero T
		return zero, nil
	}
}

// callOK calls a tool that must succeed.
func callOK[Out any](f *running, s *sdk.ClientSession, tool string, args map[string]any) Out {
	f.t.Helper()
	out, err := call[Out](f.ctx, s, tool, args)
	if err != nil {
		f.t.Fatalf("%s: %v", tool, err)
	}
	return out
}

// waitOK waits for an asynchronous call that must succeed.
func waitOK[T any](t *testing.T, ctx context.Context, ch <-chan result[T]) T {
	t.Helper()
	out, err := wait(t, ctx, ch)
	if err != nil {
		t.Fatalf("tool error: %v", err)
	}
	return out
}

func TestGateway_Delegation(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "")
	w := f.spawn("coder")
	sent := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "do X", "sessionId": "coder"})
	if got := f.prompt(w); got != "do X" {
		t.Fatalf("worker was prompted %q, want %q", got, "do X")
	}
	reply := callOK[mcp.ReplyOutput](f, w.sess, "bridge_reply", map[string]any{"content": "result"})
	if reply.Mode != "resolved" || !reply.Delivered {
		t.Errorf("bridge_reply = %+v, want delivered, resolved", reply)
	}
	out := waitOK(t, f.ctx, sent)
	m, _ := f.memberView("coder")
	want := mcp.SendOutput{Outcome: "reply", Text: "result", TurnID: reply.TurnID, SessionID: m.SessionID, Name: "coder"}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("bridge_send (-want +got):\n%s", diff)
	}
}

func (f *running) memberView(name string) (mcp.MemberView, bool) {
	list := callOK[mcp.ListOutput](f, f.primary, "bridge_list", nil)
	for _, m := range list.Members {
		if m.Name == name {
			return m, true
		}
	}
	return mcp.MemberView{}, false
}

func TestGateway_Clarification(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "")
	w := f.spawn("coder")
	first := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "fix the build"})
	f.prompt(w)
	asked := callAsync[mcp.AskOutput](f.ctx, w.sess, "bridge_ask", map[string]any{"content": "which config?"})
	q := waitOK(t, f.ctx, first)
	if q.Outcome != "question" || q.Text != "which config?" || q.TurnID == "" {
		t.Fatalf("bridge_send = %+v, want the question", q)
	}
	second := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "config.yaml", "sessionId": "coder", "turnId": q.TurnID})
	a := waitOK(t, f.ctx, asked)
	if diff := cmp.Diff(mcp.AskOutput{Outcome: "answer", Answer: "config.yaml", TurnID: q.TurnID}, a); diff != "" {
		t.Errorf("bridge_ask (-want +got):\n%s", diff)
	}
	callOK[mcp.ReplyOutput](f, w.sess, "bridge_reply", map[string]any{"content": "fixed with config.yaml"})
	r := waitOK(t, f.ctx, second)
	if r.Outcome != "reply" || r.Text != "fixed with config.yaml" || r.TurnID != q.TurnID {
		t.Errorf("second bridge_send = %+v, want the reply of turn %s", r, q.TurnID)
	}
	// The answer went through the rendezvous, never into the pane.
	if got := f.sim.Prompts(w.pane); !cmp.Equal(got, []string{"fix the build"}) {
		t.Errorf("typed into the worker's pane: %q, want only the task", got)
	}
}

func TestGateway_DetachedRepliesLandInMailbox(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "")
	w := f.spawn("coder")
	d := callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "background job", "wait": false})
	if d.Outcome != "dispatched" || d.DispatchID == "" || d.TurnID == "" {
		t.Fatalf("bridge_send wait:false = %+v, want dispatched with ids", d)
	}
	f.prompt(w)
	r := callOK[mcp.ReplyOutput](f, w.sess, "bridge_reply", map[string]any{"content": "job done"})
	if r.Mode != "queued" {
		t.Errorf("reply mode = %q, want queued", r.Mode)
	}
	polled := callOK[mcp.PollOutput](f, f.primary, "bridge_poll", nil)
	if len(polled.Messages) != 1 {
		t.Fatalf("bridge_poll = %+v, want one message", polled)
	}
	got := polled.Messages[0]
	if got.From != "coder" || got.Kind != "reply" || got.Content != "job done" || got.TurnID != d.TurnID {
		t.Errorf("polled %+v, want coder's reply of turn %s", got, d.TurnID)
	}
	// At-least-once: it stays until acknowledged; the worker's mailbox is its own.
	if again := callOK[mcp.PollOutput](f, f.primary, "bridge_poll", nil); len(again.Messages) != 1 {
		t.Errorf("second poll = %d messages, want the same 1", len(again.Messages))
	}
	if theirs := callOK[mcp.PollOutput](f, w.sess, "bridge_poll", nil); len(theirs.Messages) != 0 {
		t.Errorf("worker's poll = %+v, want its own empty mailbox", theirs)
	}
	ack := callOK[mcp.AckOutput](f, f.primary, "bridge_ack", map[string]any{"ids": []string{got.ID}})
	if ack.Acked != 1 {
		t.Errorf("acked = %d, want 1", ack.Acked)
	}
	if after := callOK[mcp.PollOutput](f, f.primary, "bridge_poll", nil); len(after.Messages) != 0 {
		t.Errorf("poll after ack = %+v, want empty", after)
	}
}

func TestGateway_TurnDoneReadsTerminalTail(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		f := startFleetOn(t, protocol)
		w := f.spawn("coder")
		sent := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "refactor"})
		f.prompt(w)
		f.setStatus(w, "working")
		if err := f.sim.WriteOutput(w.pane, "refactored 3 files, tests pass\n"); err != nil {
			t.Fatal(err)
		}
		if err := f.sim.SetAgentStatus(w.pane, "idle"); err != nil {
			t.Fatal(err)
		}
		out := waitOK(t, f.ctx, sent)
		if out.Outcome != "turn_done" || !strings.Contains(out.Text, "refactored 3 files, tests pass") {
			t.Errorf("bridge_send = %+v, want turn_done with the terminal tail", out)
		}
	})
}

func TestGateway_TimeoutKeepsTurnOpen(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "")
	w := f.spawn("coder")
	sent := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "long task", "timeoutMs": 200})
	f.prompt(w)
	out := waitOK(t, f.ctx, sent)
	if out.Outcome != "timeout" || out.TurnID == "" {
		t.Fatalf("bridge_send = %+v, want timeout with the turn id", out)
	}
	st := callOK[mcp.StatusOutput](f, f.primary, "bridge_status", map[string]any{"sessionId": w.pane})
	if len(st.Workers) != 1 || len(st.Workers[0].OpenTurns) != 1 || st.Workers[0].OpenTurns[0].TurnID != out.TurnID {
		t.Fatalf("bridge_status = %+v, want turn %s still open", st, out.TurnID)
	}
	r := callOK[mcp.ReplyOutput](f, w.sess, "bridge_reply", map[string]any{"content": "finally"})
	if r.Mode != "queued" || r.TurnID != out.TurnID {
		t.Errorf("late reply = %+v, want queued for turn %s", r, out.TurnID)
	}
	polled := callOK[mcp.PollOutput](f, f.primary, "bridge_poll", nil)
	if len(polled.Messages) != 1 || polled.Messages[0].Content != "finally" || polled.Messages[0].TurnID != out.TurnID {
		t.Errorf("bridge_poll = %+v, want the late reply", polled)
	}
}

// A forced stop closes a worker's pane in the middle of its turn: the call
// waiting on it ends with worker_gone.
func TestGateway_WorkerGoneWhileWaiting(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "")
	w := f.spawn("coder")
	file := filepath.Join(f.manifests, "coder.yaml")
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("bridge_spawn wrote no manifest: %v", err)
	}
	sent := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "task", "sessionId": "coder"})
	f.prompt(w)
	f.setStatus(w, "working")
	stop := callOK[mcp.StopOutput](f, f.primary, "bridge_stop", map[string]any{"paneId": w.pane, "force": true})
	if !stop.Stopped || !stop.Existed || stop.Terminating {
		t.Errorf("bridge_stop = %+v, want stopped an existing member, its pane closed", stop)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("manifest still there after bridge_stop: %v", err)
	}
	if _, err := wait(t, f.ctx, sent); err == nil || err.Code != "worker_gone" {
		t.Errorf("held bridge_send ended with %v, want worker_gone", err)
	}
	if _, ok := f.sim.Pane(w.pane); ok {
		t.Error("the worker's pane is still open after bridge_stop returned")
	}
	again := callOK[mcp.StopOutput](f, f.primary, "bridge_stop", map[string]any{"paneId": "coder"})
	if !again.Stopped || again.Existed {
		t.Errorf("second bridge_stop = %+v, want stopped, not existed", again)
	}
	// The revoked token no longer opens the gateway.
	if _, err := f.connectTo(f.info.MCPURL, w.token); err == nil {
		t.Error("a stopped worker's token still connects")
	}
}

// A worker stopped in the middle of its turn finishes it: bridge_stop
// returns with the worker Terminating, nothing new is sent to it, the
// primary's held bridge_send gets the reply, and then the pane closes —
// on both herdr protocols.
func TestGateway_StopMidTurnDeliversTheReplyThenCloses(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		f := startFleetOn(t, protocol)
		w := f.spawn("coder")
		sent := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "long task", "sessionId": "coder"})
		f.prompt(w)
		f.setStatus(w, "working")

		stop := callOK[mcp.StopOutput](f, f.primary, "bridge_stop", map[string]any{"paneId": "coder", "timeoutMs": 500})
		if !stop.Stopped || !stop.Existed || !stop.Terminating {
			t.Errorf("bridge_stop mid-turn = %+v, want stopped, its pane still closing", stop)
		}
		view, ok := f.memberView("coder")
		if !ok || view.Phase != v1alpha1.PhaseTerminating || view.PaneID != w.pane {
			t.Errorf("coder after the stop = %+v, %v; want listed Terminating in its pane", view, ok)
		}
		if _, err := call[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "more", "sessionId": "coder", "wait": false}); err == nil ||
			err.Code != "worker_gone" || !strings.Contains(err.Message, "takes no new message") {
			t.Errorf("a new bridge_send to the stopping coder: %v; want worker_gone, taking no new message", err)
		}
		if _, ok := f.sim.Pane(w.pane); !ok {
			t.Fatal("the pane closed in the middle of the turn")
		}

		callOK[mcp.ReplyOutput](f, w.sess, "bridge_reply", map[string]any{"content": "done: 3 files"})
		if out := waitOK(t, f.ctx, sent); out.Outcome != "reply" || out.Text != "done: 3 files" {
			t.Errorf("the held bridge_send = %+v, want the reply", out)
		}
		if err := f.sim.SetAgentStatus(w.pane, "idle"); err != nil {
			t.Fatal(err)
		}
		err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool { return len(ms) == 0 })
		if err != nil {
			t.Fatalf("coder still listed after its turn ended: %v", err)
		}
		if _, ok := f.sim.Pane(w.pane); ok {
			t.Error("the pane is still open after the turn ended")
		}
	})
}

func TestGateway_BusyWorkerGetsOneMessagePerTurnAndNothingWhileBlocked(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		f := startFleetOn(t, protocol)
		w := f.spawn("coder")
		f.setStatus(w, "working")
		base := f.sim.Calls()["agent.prompt"]
		for _, msg := range []string{"first", "second"} {
			callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": msg, "wait": false})
		}
		f.setStatus(w, "blocked")
		st := callOK[mcp.StatusOutput](f, f.primary, "bridge_status", nil)
		if n := f.sim.Calls()["agent.prompt"]; n != base || st.Workers[0].QueueDepth != 2 {
			t.Fatalf("while working then blocked: %d prompts typed, queue depth %d; want 0 and 2", n-base, st.Workers[0].QueueDepth)
		}
		// Going idle makes fleetd type the next message at once, and the fake
		// agent goes working on it: fleetd's view may never show the idle in
		// between, so wait for the delivery itself.
		if err := f.sim.SetAgentStatus(w.pane, "idle"); err != nil {
			t.Fatal(err)
		}
		if got := f.prompt(w); got != "first" {
			t.Fatalf("first delivery = %q, want first", got)
		}
		// The agent picked it up (working); the second waits for the next turn.
		f.setStatus(w, "working")
		if n := f.sim.Calls()["agent.prompt"]; n != base+1 {
			t.Fatalf("%d prompts typed during the first turn, want 1", n-base)
		}
		if err := f.sim.SetAgentStatus(w.pane, "idle"); err != nil {
			t.Fatal(err)
		}
		if got := f.prompt(w); got != "second" {
			t.Fatalf("second delivery = %q, want second", got)
		}
		if got := f.sim.Prompts(w.pane); !cmp.Equal(got, []string{"first", "second"}) {
			t.Errorf("prompts typed = %q, want first then second", got)
		}
	})
}

func TestGateway_Spoofing(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "")
	a := f.spawn("alice")
	f.spawn("bob")
	tests := []struct {
		name string
		sess *sdk.ClientSession
		tool string
		args map[string]any
		want string
	}{
		{"worker sends to another worker", a.sess, "bridge_send", map[string]any{"content": "hi", "sessionId": "bob"}, "forbidden"},
		{"worker reads another worker's status", a.sess, "bridge_status", map[string]any{"sessionId": "bob"}, "forbidden"},
		{"worker stops another worker", a.sess, "bridge_stop", map[string]any{"paneId": "bob"}, "forbidden"},
		{"worker spawns", a.sess, "bridge_spawn", map[string]any{"profile": "claude", "name": "mallory"}, "forbidden"},
		{"primary replies as a worker", f.primary, "bridge_reply", map[string]any{"content": "x"}, "forbidden"},
		{"primary asks as a worker", f.primary, "bridge_ask", map[string]any{"content": "x"}, "forbidden"},
		{"unknown argument", f.primary, "bridge_list", map[string]any{"as": "bob"}, "invalid_argument"},
		{"spawn with env", f.primary, "bridge_spawn", map[string]any{"profile": "claude", "env": map[string]any{"X": "1"}}, "subscription_boundary"},
		{"spawn with a URL", f.primary, "bridge_spawn", map[string]any{"profile": "claude", "workspace": "https://evil.example/mcp"}, "subscription_boundary"},
		{"spawn with ANTHROPIC_BASE_URL", f.primary, "bridge_spawn", map[string]any{"profile": "claude", "ANTHROPIC_BASE_URL": "http://proxy"}, "subscription_boundary"},
		{"spawn with a bad transport", f.primary, "bridge_spawn", map[string]any{"profile": "claude", "transport": "http"}, "invalid_spec"},
		{"spawn of an unknown profile", f.primary, "bridge_spawn", map[string]any{"profile": "nope"}, "invalid_spec"},
		{"send to an unknown worker", f.primary, "bridge_send", map[string]any{"content": "x", "sessionId": "zed"}, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call[map[string]any](f.ctx, tt.sess, tt.tool, tt.args)
			if err == nil || err.Code != tt.want {
				t.Fatalf("%s = %v, want %s", tt.tool, err, tt.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(f.manifests, "mallory.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a refused spawn wrote a manifest")
	}
	// The worker's identity comes from its token only.
	who := callOK[mcp.WhoamiOutput](f, a.sess, "bridge_whoami", map[string]any{})
	alice, _ := f.memberView("alice")
	if diff := cmp.Diff(mcp.WhoamiOutput{Role: "worker", Name: "alice", SessionID: alice.SessionID, PaneID: a.pane}, who); diff != "" {
		t.Errorf("worker's bridge_whoami (-want +got):\n%s", diff)
	}
	if who := callOK[mcp.WhoamiOutput](f, f.primary, "bridge_whoami", nil); who != (mcp.WhoamiOutput{Role: "primary"}) {
		t.Errorf("primary's bridge_whoami = %+v", who)
	}
	for name, token := range map[string]string{"unknown token": "not-a-token", "no token": ""} {
		if _, err := f.connectTo(f.info.MCPURL, token); err == nil {
			t.Errorf("%s: connected, want refused", name)
		}
		if code := postMCP(t, f.info.MCPURL, token, ""); code != http.StatusUnauthorized {
			t.Errorf("%s: POST /mcp = %d, want 401", name, code)
		}
	}
	// DNS rebinding: a non-loopback Host is refused even with a good token.
	req, _ := http.NewRequest(http.MethodPost, f.info.MCPURL, strings.NewReader(`{}`))
	req.Host = "evil.example:8080"
	req.Header.Set("Authorization", "Bearer "+f.token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("rebinding Host on /mcp: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	// A session opened with one token cannot be continued with another.
	if code := postMCP(t, f.info.MCPURL, a.token, f.primary.ID()); code != http.StatusForbidden {
		t.Errorf("worker token on the primary's session: %d, want 403", code)
	}
	metrics := scrape(t, f.info.URL)
	problems, err := promlint.New(strings.NewReader(metrics)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("/metrics lint: %v %v", err, problems)
	}
	for _, series := range []string{
		`fleetd_mcp_tool_calls_total{outcome="forbidden",tool="bridge_send"} 1`,
		`fleetd_mcp_tool_calls_total{outcome="subscription_boundary",tool="bridge_spawn"} 3`,
		`fleetd_mcp_tool_calls_total{outcome="ok",tool="bridge_spawn"} 2`,
		`fleetd_injector_queue_depth 0`,
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %q", series)
		}
	}
}

// postMCP posts a tools/list request to the gateway and returns the status.
func postMCP(t *testing.T, url, token, session string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestGateway_ToolsAndProfiles(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "")
	res, err := f.primary.ListTools(f.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil || tool.Annotations == nil {
			t.Errorf("%s lacks a description, schema or annotations", tool.Name)
		}
	}
	want := []string{"bridge_ack", "bridge_ask", "bridge_list", "bridge_poll", "bridge_profiles", "bridge_reply",
		"bridge_send", "bridge_spawn", "bridge_status", "bridge_stop", "bridge_whoami"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	p := callOK[mcp.ProfilesOutput](f, f.primary, "bridge_profiles", nil)
	if diff := cmp.Diff(mcp.ProfilesOutput{Profiles: []mcp.ProfileView{{Name: "claude", Harness: "claude", Description: "Claude Code worker"}}}, p); diff != "" {
		t.Errorf("bridge_profiles (-want +got):\n%s", diff)
	}
	raw, _ := f.primary.CallTool(f.ctx, &sdk.CallToolParams{Name: "bridge_profiles"})
	if b, _ := json.Marshal(raw); bytes.Contains(b, []byte("do-not-show")) {
		t.Errorf("bridge_profiles shows env values: %s", b)
	}
}

func TestGateway_Limits(t *testing.T) {
	t.Parallel()
	f := startFleetWith(t, "", &messaging.Options{PickupGrace: 10 * time.Minute, MaxWaitersPerCaller: 1, MaxContentBytes: 1024})
	w := f.spawn("coder")
	_, err := call[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": strings.Repeat("x", 1025)})
	if err == nil || err.Code != "too_large" || !strings.Contains(err.Message, "1024") {
		t.Errorf("oversized content: %v, want too_large naming the limit", err)
	}
	held := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "task"})
	f.prompt(w)
	if _, err := call[mcp.PollOutput](f.ctx, f.primary, "bridge_poll", map[string]any{"wait": true}); err == nil || err.Code != "too_many_waiters" {
		t.Errorf("second held call: %v, want too_many_waiters", err)
	}
	callOK[mcp.ReplyOutput](f, w.sess, "bridge_reply", map[string]any{"content": "ok"})
	if out := waitOK(t, f.ctx, held); out.Outcome != "reply" {
		t.Errorf("held call = %+v", out)
	}
}

func TestGateway_SendWithProfileSpawnsTheWorker(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "")
	out := callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "hello", "sessionId": "fresh", "profile": "claude", "wait": false})
	if out.Outcome != "dispatched" || out.Name != "fresh" || out.SessionID == "" {
		t.Fatalf("bridge_send with profile = %+v, want dispatched to a new member fresh", out)
	}
	data, err := os.ReadFile(filepath.Join(f.manifests, "fresh.yaml"))
	if err != nil {
		t.Fatalf("no manifest for the spawned worker: %v", err)
	}
	if !strings.Contains(string(data), "profile: claude") || strings.Contains(string(data), "status") {
		t.Errorf("manifest:\n%s\nwant the spec only", data)
	}
	if err := f.sim.WaitCalls(f.ctx, "agent.prompt", 1); err != nil {
		t.Fatal(err)
	}
	// With one worker, sessionId may be left out.
	again := callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "again", "wait": false})
	if again.Name != "fresh" {
		t.Errorf("send without sessionId went to %q, want the only worker", again.Name)
	}
}
