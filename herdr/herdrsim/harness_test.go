package herdrsim_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/herdr/internal/schemacheck"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// ioTimeout bounds every socket read in these tests so a broken fake fails
// the test instead of hanging it; nothing waits for it to pass.
const ioTimeout = 10 * time.Second

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// harness talks raw JSON lines to a fake and validates every request it
// sends and every line it receives against herdr's schema.
type harness struct {
	t     *testing.T
	srv   *herdrsim.Server
	v     *schemacheck.Validator
	clock *clock.Fake
	n     int
}

func newHarness(t *testing.T, opts *herdrsim.Options) *harness {
	t.Helper()
	var o herdrsim.Options
	if opts != nil {
		o = *opts
	}
	clk := clock.NewFake(epoch)
	if o.Clock == nil {
		o.Clock = clk
	}
	return startHarness(t, o, clk)
}

// startHarness starts the fake with o, validated, and closes it when the
// test ends; clk is the fake clock the test steps, if any.
func startHarness(t *testing.T, o herdrsim.Options, clk *clock.Fake) *harness {
	t.Helper()
	srv, err := validated.Start(&o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	v, err := schemacheck.Shared(schemaProtocol(srv.Protocol()))
	if err != nil {
		t.Fatalf("schemacheck.New: %v", err)
	}
	return &harness{t: t, srv: srv, v: v, clock: clk}
}

// schemaProtocol is the embedded schema that describes a fake of protocol p.
func schemaProtocol(p int) int {
	if p >= schemacheck.Latest {
		return schemacheck.Latest
	}
	return 20
}

func (h *harness) dial() net.Conn {
	h.t.Helper()
	c, err := h.srv.Dial(context.Background())
	if err != nil {
		h.t.Fatalf("dial %s: %v", h.srv.SocketPath(), err)
	}
	h.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(ioTimeout))
	return c
}

// request builds a request line and checks it against the schema.
func (h *harness) request(method string, params any) (string, []byte) {
	h.t.Helper()
	h.n++
	id := "req-" + itoa(h.n)
	line, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.v.Request(line); err != nil {
		h.t.Fatalf("test sent a request the schema rejects: %v", err)
	}
	return id, line
}

// send writes one request line and returns the connection for reading.
func (h *harness) send(method string, params any) (string, *lineConn) {
	h.t.Helper()
	id, line := h.request(method, params)
	c := h.dial()
	if _, err := c.Write(append(line, '\n')); err != nil {
		h.t.Fatalf("write %s: %v", method, err)
	}
	return id, &lineConn{h: h, Conn: c, r: bufio.NewReader(c)}
}

// call sends a request and returns the decoded, schema-valid response.
func (h *harness) call(method string, params any) (string, response) {
	h.t.Helper()
	id, c := h.send(method, params)
	line, ok := c.next()
	if !ok {
		h.t.Fatalf("%s: connection closed without a response", method)
	}
	return id, h.response(line)
}

// ok calls a method that must succeed and returns its result.
func (h *harness) ok(method string, params any) map[string]any {
	h.t.Helper()
	id, r := h.call(method, params)
	if r.Error != nil {
		h.t.Fatalf("%s: error %s: %s", method, r.Error.Code, r.Error.Message)
	}
	if r.ID != id {
		h.t.Fatalf("%s: response id %q, want %q", method, r.ID, id)
	}
	return r.Result
}

// fail calls a method that must fail and returns the error code and the
// response id.
func (h *harness) fail(method string, params any) (code, id string) {
	h.t.Helper()
	_, r := h.call(method, params)
	if r.Error == nil {
		h.t.Fatalf("%s: succeeded with %v, want an error", method, r.Result)
	}
	return r.Error.Code, r.ID
}

type response struct {
	ID     string         `json:"id"`
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// response validates and decodes a response line.
func (h *harness) response(line []byte) response {
	h.t.Helper()
	if err := h.v.Response(line); err != nil {
		h.t.Fatalf("fake sent a response the schema rejects: %v", err)
	}
	var r response
	if err := json.Unmarshal(line, &r); err != nil {
		h.t.Fatalf("decode response %s: %v", line, err)
	}
	return r
}

type lineConn struct {
	net.Conn
	h *harness
	r *bufio.Reader
}

// next reads one line; ok is false at EOF with nothing pending.
func (c *lineConn) next() ([]byte, bool) {
	c.h.t.Helper()
	// Each read gets ioTimeout of its own: a subscription read after a
	// long run of calls (250 under load took over 10 s) must not find
	// the deadline of the connection's dial passed.
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	line, err := c.r.ReadBytes('\n')
	if errors.Is(err, io.EOF) && len(line) == 0 {
		return nil, false
	}
	if err != nil {
		c.h.t.Fatalf("read: %v (got %q)", err, line)
	}
	return bytes.TrimSuffix(line, []byte("\n")), true
}

// event reads one stream line after the ack and validates it with the
// schema its envelope style calls for.
func (c *lineConn) event() streamLine {
	c.h.t.Helper()
	line, ok := c.next()
	if !ok {
		c.h.t.Fatal("stream ended")
	}
	if err := c.h.v.StreamLine(line); err != nil {
		c.h.t.Fatalf("fake streamed a line the schema rejects: %v", err)
	}
	var ev streamLine
	if err := json.Unmarshal(line, &ev); err != nil {
		c.h.t.Fatal(err)
	}
	ev.raw = line
	return ev
}

type streamLine struct {
	Event string         `json:"event"`
	Data  map[string]any `json:"data"`
	raw   []byte
}

// eof asserts the server closed the connection without writing anything.
func (c *lineConn) eof() {
	c.h.t.Helper()
	if line, ok := c.next(); ok {
		c.h.t.Fatalf("got %s, want the connection closed with no response", line)
	}
}

// subscribe opens a stream and checks its ack.
func (h *harness) subscribe(subs ...map[string]any) *lineConn {
	h.t.Helper()
	id, c := h.send("events.subscribe", map[string]any{"subscriptions": subs})
	line, ok := c.next()
	if !ok {
		h.t.Fatal("subscribe: closed without ack")
	}
	r := h.response(line)
	if r.ID != id || r.Result["type"] != "subscription_started" {
		h.t.Fatalf("subscribe ack = %s", line)
	}
	return c
}

func sub(typ string, kv ...any) map[string]any {
	m := map[string]any{"type": typ}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func itoa(i int) string { return strconv.Itoa(i) }

// workspace creates a workspace and returns its id and root pane id.
func (h *harness) workspace(params map[string]any) (wsID, paneID string) {
	h.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	res := h.ok("workspace.create", params)
	return str(res, "workspace", "workspace_id"), str(res, "root_pane", "pane_id")
}

// agent starts an agent on pane and returns the agent_started result.
func (h *harness) agent(name, pane string) map[string]any {
	h.t.Helper()
	return h.ok("agent.start", map[string]any{"name": name, "kind": "claude", "pane_id": pane})
}

func str(m map[string]any, path ...string) string {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = mm[k]
	}
	s, _ := v.(string)
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	t.Cleanup(cancel)
	return ctx
}

func newReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
