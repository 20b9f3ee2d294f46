package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// gateway is a whole fleetd (package daemon: controllers, messaging core,
// MCP gateway) serving one worker member against a fake herdr, with an MCP
// session for the primary.
type gateway struct {
	fake    *herdrsim.Server
	info    daemon.Info
	primary *sdk.ClientSession
	worker  string // member name
	paneID  string
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connectMCP opens an MCP session on the gateway with token; it is closed
// when tb ends.
func connectMCP(ctx context.Context, tb testing.TB, url, token string) *sdk.ClientSession {
	tb.Helper()
	transport := &http.Transport{MaxIdleConnsPerHost: 1024}
	tb.Cleanup(transport.CloseIdleConnections)
	c := sdk.NewClient(&sdk.Implementation{Name: "fleetd-bench", Version: "1"}, nil)
	s, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, transport}}, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		tb.Fatalf("connect to the MCP gateway: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// callTool calls a tool and decodes its structured result into out; a tool
// error is returned as an error carrying its text.
func callTool(ctx context.Context, s *sdk.ClientSession, name string, args map[string]any, out any) error {
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		var msg []string
		for _, c := range res.Content {
			if t, ok := c.(*sdk.TextContent); ok {
				msg = append(msg, t.Text)
			}
		}
		return fmt.Errorf("%s: tool error: %s", name, strings.Join(msg, "; "))
	}
	if out == nil {
		return nil
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// startGateway runs fleetd with one worker whose agent behaves as b (the
// fake's default for every agent) and waits until the worker is Ready and
// fleetd follows its status events. The per-token limit of MCP tool calls
// is off: the benchmarks measure the path of calls made back to back (200
// sends) or all at once (500 held), which that limit exists to refuse.
func startGateway(tb testing.TB, lat time.Duration, b herdrsim.Behavior, msg *messaging.Options) *gateway {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := tb.TempDir()
	dir, state := filepath.Join(root, "manifests"), filepath.Join(root, "state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	const worker = "w0000"
	for file, content := range map[string]string{"profile.yaml": profileYAML, worker + ".yaml": memberYAML(worker)} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	fake, err := validated.Start(&herdrsim.Options{Behavior: b})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fake.Close() })
	if lat > 0 {
		fake.InjectFault("", herdrsim.Fault{Latency: lat})
	}

	runCtx, stop := context.WithCancel(context.Background())
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(runCtx, daemon.Config{
			ManifestsDir: dir, StateDir: state, Listen: "127.0.0.1:0", HerdrSocket: fake.SocketPath(),
			Messaging: msg, Ready: func(i daemon.Info) { ready <- i }, ToolCallRate: -1,
		})
	}()
	tb.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			tb.Errorf("daemon.Run: %v", err)
		}
	})
	var info daemon.Info
	select {
	case info = <-ready:
	case err := <-done:
		tb.Fatalf("daemon.Run: %v", err)
	}
	var pane string
	if err := info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		if len(ms) == 1 && ms[0].Status.Phase == v1alpha1.PhaseReady {
			pane = ms[0].Status.PaneID
			return true
		}
		return false
	}); err != nil {
		tb.Fatalf("worker not Ready: %v", err)
	}
	// fleetd learns the worker's status from a per-pane subscription it
	// opens shortly after the pane appears.
	for subscribedPanes(tb, fake) != 1 {
		if !pause(ctx) {
			tb.Fatal("fleetd never subscribed to the worker's status")
		}
	}
	token, err := os.ReadFile(statedir.At(state).PrimaryToken())
	if err != nil {
		tb.Fatal(err)
	}
	g := &gateway{fake: fake, info: info, worker: worker, paneID: pane}
	g.primary = connectMCP(ctx, tb, info.MCPURL, strings.TrimSpace(string(token)))
	return g
}

// workerSession connects as the worker, with the token fleetd put into its
// pane's environment.
func (g *gateway) workerSession(ctx context.Context, tb testing.TB) *sdk.ClientSession {
	tb.Helper()
	env, ok := g.fake.PaneEnv(g.paneID)
	if !ok || env[harness.TokenEnv] == "" {
		tb.Fatalf("worker pane %s has no %s", g.paneID, harness.TokenEnv)
	}
	return connectMCP(ctx, tb, g.info.MCPURL, env[harness.TokenEnv])
}

type sendOutput struct {
	Outcome string `json:"outcome"`
	Text    string `json:"text"`
	TurnID  string `json:"turnId"`
}

// replyingWorker is an agent that, when a prompt is typed into it, starts
// working, answers at once through bridge_reply and goes idle again.
type replyingWorker struct {
	mu      sync.Mutex
	fake    *herdrsim.Server
	session *sdk.ClientSession
	errs    chan error
}

func (w *replyingWorker) onPrompt(paneID, prompt string) {
	w.mu.Lock()
	fake, s := w.fake, w.session
	w.mu.Unlock()
	err := fake.SetAgentStatus(paneID, "working")
	if err == nil {
		err = callTool(context.Background(), s, "bridge_reply", map[string]any{"content": "done: " + prompt}, nil)
	}
	if err == nil {
		err = fake.SetAgentStatus(paneID, "idle")
	}
	if err != nil {
		select {
		case w.errs <- err:
		default:
		}
	}
}

// measureRendezvous holds k bridge_send calls in turn, each answered at once
// by the worker, and returns their latencies and the herdr calls made
// meanwhile. The baseline is the floor of that path: the primary's and the
// worker's MCP round trips (bridge_whoami each) plus one herdr call.
func measureRendezvous(tb testing.TB, k int, lat time.Duration) (fleetd, base []time.Duration, calls map[string]int) {
	tb.Helper()
	w := &replyingWorker{errs: make(chan error, 1)}
	g := startGateway(tb, lat, herdrsim.Behavior{OnPrompt: w.onPrompt}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws := g.workerSession(ctx, tb)
	w.mu.Lock()
	w.fake, w.session = g.fake, ws
	w.mu.Unlock()

	before := g.fake.Calls()
	for i := range k {
		var out sendOutput
		start := time.Now()
		err := callTool(ctx, g.primary, "bridge_send", map[string]any{
			"content": fmt.Sprintf("task %d", i), "sessionId": g.worker, "timeoutMs": 30000,
		}, &out)
		fleetd = append(fleetd, time.Since(start))
		if err != nil {
			tb.Fatalf("send %d: %v", i, err)
		}
		if out.Outcome != "reply" || out.Text != fmt.Sprintf("done: task %d", i) {
			tb.Fatalf("send %d: outcome %q text %q, want the worker's reply", i, out.Outcome, out.Text)
		}
		select {
		case err := <-w.errs:
			tb.Fatalf("worker: %v", err)
		default:
		}
	}
	calls = diffCalls(before, g.fake.Calls())

	for range k {
		start := time.Now()
		if err := callTool(ctx, g.primary, "bridge_whoami", nil, nil); err != nil {
			tb.Fatal(err)
		}
		if err := callTool(ctx, ws, "bridge_whoami", nil, nil); err != nil {
			tb.Fatal(err)
		}
		if _, err := herdrClient(g.fake).GetAgent(ctx, g.paneID); err != nil {
			tb.Fatal(err)
		}
		base = append(base, time.Since(start))
	}
	return fleetd, base, calls
}

// heldCalls is the outcome of n simultaneous held bridge_send calls.
type heldCalls struct {
	errors, timeouts int
	firstErr         error
	// heapDelta and goroutineDelta are the growth of this process (fleetd,
	// the fake herdr and the MCP clients together) while all calls are
	// held, measured after a GC.
	heapDelta, goroutineDelta float64
}

// measureHeld starts n bridge_send calls at once to a worker that keeps
// working on its first prompt, so that every call is held until hold
// passes; it measures the process while all are held, then counts the
// outcomes.
func measureHeld(tb testing.TB, n int, lat, hold time.Duration, msg *messaging.Options) heldCalls {
	tb.Helper()
	g := startGateway(tb, lat, herdrsim.Behavior{Then: herdrsim.StayWorking}, msg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	heap0, gor0 := processMemory()

	var r heldCalls
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out sendOutput
			err := callTool(ctx, g.primary, "bridge_send", map[string]any{
				"content": fmt.Sprintf("held %d", i), "sessionId": g.worker, "timeoutMs": hold.Milliseconds(),
			}, &out)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				r.errors++
				if r.firstErr == nil {
					r.firstErr = err
				}
			case out.Outcome == "timeout":
				r.timeouts++
			}
		}()
	}
	// All calls are in: each one either failed or holds a waiter.
	for {
		var st struct {
			Workers []struct {
				OpenTurns []struct {
					Waiting bool `json:"waiting"`
				} `json:"openTurns"`
			} `json:"workers"`
		}
		if err := callTool(ctx, g.primary, "bridge_status", map[string]any{"sessionId": g.worker}, &st); err != nil {
			tb.Fatal(err)
		}
		waiting := 0
		for _, w := range st.Workers {
			for _, t := range w.OpenTurns {
				if t.Waiting {
					waiting++
				}
			}
		}
		mu.Lock()
		failed := r.errors
		mu.Unlock()
		if waiting+failed >= n {
			break
		}
		if !pause(ctx) {
			tb.Fatalf("only %d of %d calls held (%d failed)", waiting, n, failed)
		}
	}
	heap1, gor1 := processMemory()
	r.heapDelta, r.goroutineDelta = heap1-heap0, gor1-gor0
	wg.Wait()
	return r
}

// processMemory returns this process's heap in use (bytes, after a GC) and
// its goroutines.
func processMemory() (heap, goroutines float64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse), float64(runtime.NumGoroutine())
}
