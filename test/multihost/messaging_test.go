package multihost

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/mcpbridge"
	"github.com/fleetd-dev/fleetd/mcp"
)

// The messaging tests run whole fleetd nodes on one etcd prefix and talk
// to their gateways as MCP clients: the primary with the fleet's primary
// token (every node accepts it), a worker with the FLEETD_TOKEN of its
// pane against its own node. The simulated agents answer every prompt
// with "echo: PROMPT" through bridge_reply; a pane whose behaviour a test
// scripts reports its prompts on a channel instead and the test speaks
// for its agent.

// connectMCP opens an MCP session with the gateway at url as token; it
// closes when the test ends.
func connectMCP(tb testing.TB, ctx context.Context, url, token string) *sdk.ClientSession {
	tb.Helper()
	bt, err := mcpbridge.NewBearerTransport(url, token, nil)
	if err != nil {
		tb.Fatal(err)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "multihost-test", Version: "1"}, nil)
	s, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bt}, MaxRetries: -1}, nil)
	if err != nil {
		tb.Fatalf("connect to the gateway %s: %v", url, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// primary is the primary's session with n's gateway.
func (n *fleetNode) primary(t testing.TB, ctx context.Context) *sdk.ClientSession {
	return connectMCP(t, ctx, n.info.MCPURL, n.token)
}

// toolCall calls a tool and decodes its structured result, or returns its
// tool error (*mcp.ToolError; code "undecodable" for an error result that
// is not one).
func toolCall[Out any](ctx context.Context, s *sdk.ClientSession, tool string, args map[string]any) (Out, error) {
	var out Out
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return out, err
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if res.IsError {
		var te mcp.ToolError
		if err := json.Unmarshal(raw, &te); err != nil || te.Code == "" {
			return out, &mcp.ToolError{Code: "undecodable", Message: string(raw)}
		}
		return out, &te
	}
	return out, json.Unmarshal(raw, &out)
}

func mustCall[Out any](t testing.TB, ctx context.Context, s *sdk.ClientSession, tool string, args map[string]any) Out {
	t.Helper()
	out, err := toolCall[Out](ctx, s, tool, args)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return out
}

type callResult[T any] struct {
	out T
	err error
}

func asyncCall[Out any](ctx context.Context, s *sdk.ClientSession, tool string, args map[string]any) <-chan callResult[Out] {
	ch := make(chan callResult[Out], 1)
	go func() {
		out, err := toolCall[Out](ctx, s, tool, args)
		ch <- callResult[Out]{out, err}
	}()
	return ch
}

func awaitCall[T any](t *testing.T, ctx context.Context, ch <-chan callResult[T]) T {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("call failed: %v", r.err)
		}
		return r.out
	case <-ctx.Done():
		t.Fatal("call did not return")
		panic("unreachable")
	}
}

// scripted makes the agent in member's pane on srv report its prompts on
// the returned channel (and go working) instead of answering, and returns
// a session of that worker with its own node's gateway.
func scripted(t *testing.T, ctx context.Context, srv *herdrsim.Server, member, gateway string) (chan string, *sdk.ClientSession) {
	t.Helper()
	panes := agentPanes(srv, member)
	if len(panes) != 1 {
		t.Fatalf("%s runs in panes %v, want one", member, panes)
	}
	prompts := make(chan string, 16)
	srv.SetBehavior(panes[0], herdrsim.Behavior{OnPrompt: func(pane, text string) {
		srv.SetAgentStatus(pane, "working")
		prompts <- text
	}})
	env, ok := srv.PaneEnv(panes[0])
	if !ok || env["FLEETD_TOKEN"] == "" {
		t.Fatalf("pane %s has no FLEETD_TOKEN", panes[0])
	}
	return prompts, connectMCP(t, ctx, gateway, env["FLEETD_TOKEN"])
}

func nextPrompt(t *testing.T, ctx context.Context, prompts <-chan string) string {
	t.Helper()
	select {
	case p := <-prompts:
		return p
	case <-ctx.Done():
		t.Fatal("the worker was never prompted")
		return ""
	}
}

const claudeProfile = "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n"

func pinned(name, node string) string {
	return "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + name + "}\nspec: {profile: claude, nodeName: " + node + "}\n"
}

// Three nodes, each on its own simulated herdr. The primary on a reaches
// a worker on b with a held bridge_send (the reply comes back in the
// call); a worker on c asks, the primary answers from b and gets the
// reply there; a detached send's reply is polled and acknowledged on c.
func TestMessaging_AcrossNodes(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix("/fleet-msg")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	putProfile(t, prefix)
	a, b, c := startNode(t, prefix, "a"), startNode(t, prefix, "b"), startNode(t, prefix, "c")
	untilReady(t, []*fleetNode{a}, "a", "b", "c")
	for _, body := range []string{pinned("coder", "b"), pinned("asker", "c")} {
		if code, resp := a.do(t, "POST", "/members", body); code != http.StatusCreated {
			t.Fatalf("POST /members = %d %s", code, resp)
		}
	}
	b.waitFor(t, "coder ready on b", readyOn("coder"))
	c.waitFor(t, "asker ready on c", readyOn("asker"))
	pa, pb, pc := a.primary(t, ctx), b.primary(t, ctx), c.primary(t, ctx)

	// Delegation: a held call on a, the worker on b.
	out := mustCall[mcp.SendOutput](t, ctx, pa, "bridge_send", map[string]any{"content": "hello", "sessionId": "coder", "timeoutMs": 30000})
	if out.Outcome != "reply" || out.Text != "echo: hello" || out.Name != "coder" || out.TurnID == "" {
		t.Fatalf("bridge_send on a to coder on b = %+v, want the reply echo: hello", out)
	}

	// Clarification: asker on c asks; the primary answers from b.
	prompts, asker := scripted(t, ctx, c.info.Sim, "asker", c.info.MCPURL)
	first := asyncCall[mcp.SendOutput](ctx, pa, "bridge_send", map[string]any{"content": "fix the build", "sessionId": "asker", "timeoutMs": 30000})
	if got := nextPrompt(t, ctx, prompts); got != "fix the build" {
		t.Fatalf("asker was prompted %q", got)
	}
	asked := asyncCall[mcp.AskOutput](ctx, asker, "bridge_ask", map[string]any{"content": "which config?", "timeoutMs": 30000})
	q := awaitCall(t, ctx, first)
	if q.Outcome != "question" || q.Text != "which config?" || q.TurnID == "" {
		t.Fatalf("bridge_send = %+v, want the question", q)
	}
	second := asyncCall[mcp.SendOutput](ctx, pb, "bridge_send", map[string]any{"content": "config.yaml", "turnId": q.TurnID, "timeoutMs": 30000})
	if ans := awaitCall(t, ctx, asked); ans.Outcome != "answer" || ans.Answer != "config.yaml" || ans.TurnID != q.TurnID {
		t.Fatalf("bridge_ask on c = %+v, want the answer from b", ans)
	}
	if r := mustCall[mcp.ReplyOutput](t, ctx, asker, "bridge_reply", map[string]any{"content": "fixed"}); r.TurnID != q.TurnID {
		t.Errorf("bridge_reply = %+v, want turn %s", r, q.TurnID)
	}
	if r := awaitCall(t, ctx, second); r.Outcome != "reply" || r.Text != "fixed" || r.TurnID != q.TurnID {
		t.Errorf("the answer's bridge_send on b = %+v, want the reply of turn %s", r, q.TurnID)
	}
	if got := agentPrompts(c.info.Sim, "asker"); len(got) != 1 {
		t.Errorf("typed into asker's pane: %q, want the task only (the answer goes through the rendezvous)", got)
	}

	// Detached: sent on a, the reply polled and acknowledged on c.
	d := mustCall[mcp.SendOutput](t, ctx, pa, "bridge_send", map[string]any{"content": "later", "sessionId": "coder", "wait": false})
	if d.Outcome != "dispatched" {
		t.Fatalf("detached bridge_send = %+v", d)
	}
	poll := mustCall[mcp.PollOutput](t, ctx, pc, "bridge_poll", map[string]any{"wait": true, "timeoutMs": 30000})
	if len(poll.Messages) != 1 || poll.Messages[0].Content != "echo: later" || poll.Messages[0].From != "coder" ||
		poll.Messages[0].Kind != "reply" || poll.Messages[0].TurnID != d.TurnID {
		t.Fatalf("bridge_poll on c = %+v, want coder's reply to turn %s", poll, d.TurnID)
	}
	// Every node shows the fleet mailbox (each from its own mirror: b's
	// waiting poll returns once b has seen it too).
	if p := mustCall[mcp.PollOutput](t, ctx, pb, "bridge_poll", map[string]any{"wait": true, "timeoutMs": 30000}); len(p.Messages) != 1 || p.Messages[0].ID != poll.Messages[0].ID {
		t.Errorf("bridge_poll on b = %+v, want the same message", p)
	}
	if st := mustCall[mcp.StatusOutput](t, ctx, pb, "bridge_status", map[string]any{"sessionId": "coder"}); st.Pending != 1 {
		t.Errorf("pending on b = %d, want the one fleet message", st.Pending)
	}
	if ack := mustCall[mcp.AckOutput](t, ctx, pc, "bridge_ack", map[string]any{"ids": []string{poll.Messages[0].ID}}); ack.Acked != 1 {
		t.Errorf("bridge_ack = %+v", ack)
	}
	if ack := mustCall[mcp.AckOutput](t, ctx, pa, "bridge_ack", map[string]any{"ids": []string{poll.Messages[0].ID}}); ack.Acked != 0 {
		t.Errorf("bridge_ack again on a = %+v, want 0", ack)
	}
	if p := mustCall[mcp.PollOutput](t, ctx, pa, "bridge_poll", nil); len(p.Messages) != 0 {
		t.Errorf("bridge_poll on a after the ack = %+v, want nothing", p)
	}
	// bridge_status on a shows coder's messaging state as b publishes it.
	for tick := time.NewTicker(20 * time.Millisecond); ; {
		st := mustCall[mcp.StatusOutput](t, ctx, pa, "bridge_status", map[string]any{"sessionId": "coder"})
		if len(st.Workers) == 1 && st.Workers[0].LastDelivery != nil && st.Workers[0].LastDelivery.TurnID == d.TurnID &&
			st.Workers[0].LastDelivery.Result == "delivered" && st.Workers[0].Name == "coder" {
			tick.Stop()
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("bridge_status on a never showed coder's last delivery (turn %s) from b: %+v", d.TurnID, st)
		case <-tick.C:
		}
	}
	if got := agentPrompts(b.info.Sim, "coder"); !equalSet(got, "hello", "later") {
		t.Errorf("typed into coder's pane: %q, want hello and later once each", got)
	}
}

// agentPrompts are the prompts the named agent's pane took.
func agentPrompts(srv *herdrsim.Server, name string) []string {
	for _, p := range srv.Panes() {
		if p.AgentName == name {
			return p.Prompts
		}
	}
	return nil
}

func nodeReady(n v1alpha1.Node) bool { return n.ReadyCondition().Status == v1alpha1.ConditionTrue }

// The worker's node restarts while a turn is open and the primary on
// another node holds a call on it: the turn and its deadline survive, the
// prompt is not typed again, and the reply arrives in the held call.
func TestMessaging_WorkerNodeRestartsWithATurnOpen(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix("/fleet-msg-restart")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	putProfile(t, prefix)
	a := startNode(t, prefix, "a")
	herdrB, err := validated.Start(&herdrsim.Options{SocketPath: filepath.Join(t.TempDir(), "herdr.sock"), InitialWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { herdrB.Close() })
	// b takes a free port itself (a port found free and closed could be
	// taken by a parallel test first); its restart listens where it did.
	cfgB := daemon.Config{HerdrSocket: herdrB.SocketPath(), StateDir: t.TempDir(),
		Etcd: &daemon.EtcdConfig{Endpoints: cluster.Endpoints(), Prefix: prefix, Node: "b"}}
	b, stopB := runDaemon(t, cfgB)
	cfgB.Listen = strings.TrimPrefix(b.info.URL, "http://")
	a.untilNode(t, "b", "Ready", nodeReady)
	if code, resp := a.do(t, "POST", "/members", pinned("coder", "b")); code != http.StatusCreated {
		t.Fatalf("POST /members = %d %s", code, resp)
	}
	b.waitFor(t, "coder ready on b", readyOn("coder"))
	prompts, _ := scripted(t, ctx, herdrB, "coder", b.info.MCPURL)
	pa := a.primary(t, ctx)

	held := asyncCall[mcp.SendOutput](ctx, pa, "bridge_send", map[string]any{"content": "long task", "sessionId": "coder", "timeoutMs": 60000})
	if got := nextPrompt(t, ctx, prompts); got != "long task" {
		t.Fatalf("coder was prompted %q", got)
	}
	turnsOn := func(n *fleetNode) []mcp.TurnView {
		s := connectMCP(t, ctx, n.info.MCPURL, n.token)
		defer s.Close()
		st := mustCall[mcp.StatusOutput](t, ctx, s, "bridge_status", map[string]any{"sessionId": "coder"})
		return st.Workers[0].OpenTurns
	}
	before := turnsOn(b)
	if len(before) != 1 {
		t.Fatalf("open turns on b: %+v, want one", before)
	}

	stopB()
	b, _ = runDaemon(t, cfgB)
	b.waitFor(t, "coder ready on b again", readyOn("coder"))
	after := turnsOn(b)
	if len(after) != 1 || after[0].TurnID != before[0].TurnID || after[0].Deadline != before[0].Deadline {
		t.Fatalf("open turns on b after its restart: %+v, want %+v", after, before)
	}
	panes := agentPanes(herdrB, "coder")
	env, _ := herdrB.PaneEnv(panes[0])
	worker := connectMCP(t, ctx, b.info.MCPURL, env["FLEETD_TOKEN"])
	mustCall[mcp.ReplyOutput](t, ctx, worker, "bridge_reply", map[string]any{"content": "done after the restart"})
	if r := awaitCall(t, ctx, held); r.Outcome != "reply" || r.Text != "done after the restart" || r.TurnID != before[0].TurnID {
		t.Fatalf("the held bridge_send on a = %+v, want the reply", r)
	}
	if got := herdrB.Prompts(panes[0]); len(got) != 1 {
		t.Errorf("typed into coder's pane: %q, want the task once", got)
	}
}
