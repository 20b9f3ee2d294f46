package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/internal/listener"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/quota"
	"github.com/fleetd-dev/fleetd/internal/tokens"
	"github.com/fleetd-dev/fleetd/mcp"
)

// Bearer tokens of the chaos fleet's gateway: the primary's, and one per
// member (workerToken).
const primaryToken = "chaos-primary"

func workerToken(member string) string { return "chaos-worker-" + member }

// chaosTokens resolves the chaos fleet's bearer tokens. Workers' tokens
// name their member only: the schedule's floods speak for a member
// whatever its pane.
type chaosTokens struct{}

func (chaosTokens) Resolve(token string) (tokens.Identity, bool) {
	if token == primaryToken {
		return tokens.Identity{Role: tokens.RolePrimary}, true
	}
	if name, ok := strings.CutPrefix(token, "chaos-worker-"); ok {
		return tokens.Identity{Role: tokens.RoleWorker, Member: name}, true
	}
	return tokens.Identity{}, false
}

// probeTimeout bounds one MCP call of the schedule's own clients: a
// gateway that takes longer is stalled (the calls answer in milliseconds).
const probeTimeout = 5 * time.Second

// gateway is one fleetd's MCP gateway (package mcp's handler, as the
// daemon serves it, with the chaos fleet's small tool-call rate and the
// member watch) on a loopback listener bounded as the daemon bounds it
// (internal/listener, with the chaos fleet's small connection cap and the
// held-call quota it implies), and the HTTP transport of the schedule's
// clients.
type gateway struct {
	h      *mcp.Handler
	srv    *http.Server
	served chan error // Serve's result
	url    string     // http://ADDR
	addr   string
	tr     *http.Transport
}

// chaosConns is the chaos listener's connection cap: small, so that the
// hostile clients (hostile_test.go) reach it in one step.
const chaosConns = 64

func (w *world) startGateway(mgr *controllers.Manager, core *messaging.Core) *gateway {
	w.t.Helper()
	limits, err := (&listener.Limits{MaxConns: chaosConns}).WithDefaults()
	if err != nil {
		w.t.Fatal(err)
	}
	holds, err := quota.New(mcp.HeldLimits(limits.HeldCalls()))
	if err != nil {
		w.t.Fatal(err)
	}
	h, err := mcp.NewHandler(mcp.Options{Members: mgr, Waiter: mgr, Tokens: chaosTokens{}, Loopback: true, Logger: w.log,
		Messages: core, ToolCallRate: toolCallRate, ToolCallBurst: toolCallBurst, Holds: holds})
	if err != nil {
		w.t.Fatalf("mcp handler: %v", err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		w.t.Fatal(err)
	}
	srv, ln := listener.NewServer(h, raw, limits, w.log)
	g := &gateway{h: h, srv: srv, served: make(chan error, 1), url: "http://" + raw.Addr().String(), addr: raw.Addr().String(), tr: &http.Transport{}}
	go func() { g.served <- srv.Serve(ln) }()
	return g
}

// close cuts every connection (held calls included), stops the listener
// and ends the sessions left open.
func (g *gateway) close(t *testing.T) {
	g.srv.Close()
	if err := <-g.served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("chaos gateway: %v", err)
	}
	if err := g.h.Close(); err != nil {
		t.Errorf("mcp gateway close: %v", err)
	}
	g.tr.CloseIdleConnections()
}

// connect opens an MCP session with token, as an agent's MCP client does.
func (g *gateway) connect(ctx context.Context, token string) (*sdk.ClientSession, error) {
	return g.connectWith(ctx, token, g.tr)
}

// connectWith is connect through the HTTP transport tr.
func (g *gateway) connectWith(ctx context.Context, token string, tr http.RoundTripper) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "chaos", Version: "1"}, nil)
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: g.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token, tr}}, MaxRetries: -1}, nil)
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// callTool calls a tool and decodes its structured result into out. A
// tool error is returned as its code word (with err nil); err is a failure
// of the call itself (transport, session, timeout).
func callTool(ctx context.Context, cs *sdk.ClientSession, name string, args, out any) (string, error) {
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return "", err
	}
	if res.IsError {
		var te mcp.ToolError
		if json.Unmarshal(b, &te) != nil || te.Code == "" {
			return "", fmt.Errorf("%s: a tool error without a code: %s", name, b)
		}
		return te.Code, nil
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return "", fmt.Errorf("%s: result %s: %w", name, b, err)
		}
	}
	return "", nil
}

// probe checks that the gateway serves others while a slow client holds
// its connection: a fresh primary session reads the fleet's status and
// /healthz answers, each within probeTimeout.
func (w *world) probe(why string) string {
	gw := w.fd.gw
	ctx, cancel := context.WithTimeout(w.ctx, probeTimeout)
	defer cancel()
	start := time.Now()
	cs, err := gw.connect(ctx, primaryToken)
	if err != nil {
		w.problem("%s: a second MCP session could not connect within %s: %v", why, probeTimeout, err)
		return "probe: connect failed"
	}
	defer cs.Close()
	var st mcp.StatusOutput
	if code, err := callTool(ctx, cs, "bridge_status", map[string]any{}, &st); err != nil || code != "" {
		w.problem("%s: bridge_status of a second session failed within %s: %v %s", why, probeTimeout, err, code)
		return "probe: bridge_status failed"
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", gw.url+"/healthz", nil)
	resp, err := (&http.Client{Transport: gw.tr}).Do(req)
	if err != nil {
		w.problem("%s: /healthz failed within %s: %v", why, probeTimeout, err)
		return "probe: /healthz failed"
	}
	resp.Body.Close()
	return fmt.Sprintf("probe: another session served in %s", time.Since(start).Round(time.Millisecond))
}

// slowClient is an MCP client that holds a call on a connection it feeds
// and drains at a trickle (and in the end deletes its session, unless
// fleetd died first): its session is the primary's (the caller every
// other message of the schedule is from, so that any per-caller state it
// could stall is the busiest one), its request body arrives in two parts
// steps apart, and it reads the answer (a bridge_poll that waits for mail,
// or for good) a few hundred bytes per step through a tiny receive buffer,
// never acknowledging what it reads. It hangs up as a client that dies does:
// its connection closes, its session is never deleted.
type slowClient struct {
	session string
	conn    net.Conn
	rest    []byte // the request's unsent part
	read    int    // response bytes read so far
}

// initSession opens an MCP session by hand (initialize, then
// notifications/initialized), leaving nothing running on the client's
// side; it returns the session id and the protocol version agreed.
func (g *gateway) initSession(ctx context.Context, token string) (string, string, error) {
	hc := &http.Client{Transport: bearer{token, g.tr}}
	post := func(session, body string) (*http.Response, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", g.url+"/mcp", strings.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp, b, err
	}
	resp, b, err := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
		`"capabilities":{},"clientInfo":{"name":"chaos-slow","version":"1"}}}`)
	if err != nil {
		return "", "", err
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		return "", "", fmt.Errorf("initialize: %s, session %q: %s", resp.Status, session, b)
	}
	var init struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	for line := range strings.Lines(string(b)) { // a JSON body, or SSE "data:" lines
		if js, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok || strings.HasPrefix(line, "{") {
			if !ok {
				js = line
			}
			if json.Unmarshal([]byte(js), &init) == nil && init.Result.ProtocolVersion != "" {
				break
			}
		}
	}
	if init.Result.ProtocolVersion == "" {
		return "", "", fmt.Errorf("initialize: no protocol version in %s", b)
	}
	resp, b, err = post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", "", fmt.Errorf("notifications/initialized: %s: %s", resp.Status, b)
	}
	return session, init.Result.ProtocolVersion, nil
}

// startSlowClient opens the slow client's session and sends the first
// part of its call: with hold, one that waits for good (a poll after a
// cursor no mail reaches), otherwise one answered with the mailbox's first
// page (or the next mail) that it then reads at a trickle.
func (w *world) startSlowClient(hold bool) (string, error) {
	gw := w.fd.gw
	ctx, cancel := context.WithTimeout(w.ctx, probeTimeout)
	defer cancel()
	session, version, err := gw.initSession(ctx, primaryToken)
	if err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	conn, err := smallReceiveBuffer.DialContext(ctx, "tcp", gw.addr)
	if err != nil {
		return "", fmt.Errorf("dial: %w", err)
	}
	args := `{"wait":true,"timeoutMs":600000,"limit":1000}` // answered with a page of mail now, or at the next mail
	if hold {
		args = `{"wait":true,"timeoutMs":600000,"cursor":"c999999999999"}` // waits for mail that never comes
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bridge_poll","arguments":` + args + `}}`
	head := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\nContent-Length: %d\r\n\r\n",
		gw.addr, primaryToken, session, version, len(body))
	req := []byte(head + body)
	half := len(head) + len(body)/2
	if _, err := conn.Write(req[:half]); err != nil {
		conn.Close()
		return "", fmt.Errorf("write: %w", err)
	}
	w.slow = &slowClient{session: session, conn: conn, rest: req[half:]}
	return fmt.Sprintf("session %s, %d of %d request bytes sent", session, half, len(req)), nil
}

// trickle moves the slow client on by one step: the rest of its request,
// or a few hundred bytes of the answer (what arrives within a
// millisecond). It reports what it did and whether the answer is complete.
func (s *slowClient) trickle() (string, bool) {
	if s.rest != nil {
		if _, err := s.conn.Write(s.rest); err != nil {
			return "the rest of its request failed: " + err.Error(), true
		}
		s.rest = nil
		return "sends the rest of its request", false
	}
	buf := make([]byte, 256)
	s.conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	n, err := s.conn.Read(buf)
	s.read += n
	var ne net.Error
	switch {
	case err == nil:
		return fmt.Sprintf("reads %d bytes of the answer (%d so far)", n, s.read), false
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("reads %d bytes of the answer (%d so far; nothing more yet)", n, s.read), false
	default:
		return fmt.Sprintf("reads %d bytes, then the connection ends (%d in all): %v", n, s.read, err), true
	}
}

// close hangs the slow client up.
func (s *slowClient) close() { s.conn.Close() }

// deleteSession ends the slow client's session as a client that closes
// cleanly does (HTTP DELETE), after its connection is gone; it must be
// answered within probeTimeout.
func (w *world) deleteSession(s *slowClient) string {
	gw := w.fd.gw
	ctx, cancel := context.WithTimeout(w.ctx, probeTimeout)
	defer cancel()
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "DELETE", gw.url+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", s.session)
	resp, err := (&http.Client{Transport: bearer{primaryToken, gw.tr}}).Do(req)
	if err != nil {
		w.problem("the DELETE of the slow client's session %s (a call of it held) was not answered within %s: %v", s.session, probeTimeout, err)
		return "its session's DELETE hangs"
	}
	resp.Body.Close()
	return fmt.Sprintf("its session's DELETE answered %s in %s", resp.Status, time.Since(start).Round(time.Millisecond))
}

// smallReceiveBuffer dials with a 2 KiB receive buffer: a client that
// reads slowly, or not at all, holds the server's writes at once.
var smallReceiveBuffer = net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
	}); err != nil {
		return err
	}
	return serr
}}

// dropSlowClient hangs up the slow client, if there is one.
func (w *world) dropSlowClient(why string) {
	if w.slow == nil {
		return
	}
	s := w.slow
	w.slow = nil
	s.close()
	what := "slow MCP client hangs up: " + why
	if w.fd != nil {
		what += "; " + w.deleteSession(s)
	}
	w.record(what)
}

// actVanishingSender is a primary's MCP client that holds a bridge_send
// (wait) to a running member on its own connection and then goes away,
// closing the connection and deleting its session as a client that exits
// does. The held call must end with its connection (the SDK would keep it
// running, for a resumption that without an event store never comes), so
// that the DELETE is answered at once and the worker's reply lands in the
// primary's mailbox rather than with a waiter nobody reads: the ledger
// holds the message to that.
func (w *world) actVanishingSender(rng *rand.Rand) string {
	if w.fd == nil {
		return "vanishing sender: (fleetd is down)"
	}
	var names []string
	for _, m := range w.fd.mgr.Members() {
		if m.Status.Phase == v1alpha1.PhaseReady && m.Status.PaneID != "" {
			names = append(names, m.Name)
		}
	}
	name, ok := pick(rng, names)
	if !ok {
		return "vanishing sender: no running members"
	}
	gw, core := w.fd.gw, w.fd.core
	ctx, cancel := context.WithTimeout(w.ctx, probeTimeout)
	defer cancel()
	session, version, err := gw.initSession(ctx, primaryToken)
	if err != nil {
		w.problem("vanishing sender: session: %v", err)
		return "vanishing sender: no session"
	}
	before := map[string]bool{}
	for _, ot := range core.Status(name).OpenTurns {
		before[ot.ID] = true
	}
	w.nextMsg++
	text := fmt.Sprintf("task-%d-%d", w.seed, w.nextMsg)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bridge_send","arguments":`+
		`{"sessionId":%q,"content":%q,"wait":true,"timeoutMs":600000}}}`, name, text)
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", gw.addr)
	if err != nil {
		w.problem("vanishing sender: dial: %v", err)
		return "vanishing sender: no connection"
	}
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\nContent-Length: %d\r\n"+
		"Connection: close\r\n\r\n%s", // so that an answer ends with the connection
		gw.addr, primaryToken, session, version, len(body), body)
	turn := ""
	for turn == "" && ctx.Err() == nil { // the send opens its turn within milliseconds
		for _, ot := range core.Status(name).OpenTurns {
			if !before[ot.ID] {
				turn = ot.ID
			}
		}
		if turn == "" {
			tm := time.NewTimer(time.Millisecond)
			<-tm.C
		}
	}
	if turn == "" { // refused, or ended at once (worker_gone): its answer is on the connection
		conn.SetReadDeadline(time.Now().Add(probeTimeout))
		b, _ := io.ReadAll(io.LimitReader(conn, 4<<10))
		conn.Close()
		return fmt.Sprintf("vanishing sender: bridge_send to %s ended before it went away: %q", name, firstLine(b))
	}
	conn.Close()
	s := &sent{turn: turn, worker: name, text: text}
	w.mu.Lock()
	w.ledger[turn] = s
	w.byText[text] = s
	w.mu.Unlock()
	del := w.deleteSession(&slowClient{session: session})
	// Once the DELETE is answered the call is over. A turn still open then
	// must end in the mailbox; one that ended before may have ended in the
	// answer written to the connection the client had just left, which is
	// the client's to lose: its outcome may be missing (never doubled).
	still := false
	for _, ot := range core.Status(name).OpenTurns {
		still = still || ot.ID == turn
	}
	if !still {
		w.mu.Lock()
		s.uncertain = true
		w.mu.Unlock()
	}
	return fmt.Sprintf("send %s to %s from an MCP client that then goes away: turn %s (open when it left: %v); %s", text, name, turn, still, del)
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\r\n")
	return line
}
