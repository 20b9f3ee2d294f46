package herdr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/internal/schemacheck"
)

// This file is a tiny scripted herdr: a Unix-socket server in the test's temp
// dir whose handler answers each connection with exact lines. Every
// connection is checked the way herdr sees it: the client sends exactly one
// schema-valid request line and then nothing at all until it closes.

// wireCheck checks a line against the schema of every protocol the client
// speaks: what it sends must suit herdr 0.8.2 and 0.9, and what a script
// answers must be something either could send.
type wireCheck []*schemacheck.Validator

func (w wireCheck) each(f func(v *schemacheck.Validator) error) error {
	for _, v := range w {
		if err := f(v); err != nil {
			return err
		}
	}
	return nil
}

func (w wireCheck) Request(line []byte) error {
	return w.each(func(v *schemacheck.Validator) error { return v.Request(line) })
}

func (w wireCheck) Response(line []byte) error {
	return w.each(func(v *schemacheck.Validator) error { return v.Response(line) })
}

func (w wireCheck) StreamLine(line []byte) error {
	return w.each(func(v *schemacheck.Validator) error { return v.StreamLine(line) })
}

func mustValidator(t *testing.T) wireCheck {
	t.Helper()
	var w wireCheck
	for _, p := range schemacheck.Protocols {
		v, err := schemacheck.Shared(p)
		if err != nil {
			t.Fatalf("compile herdr schema: %v", err)
		}
		w = append(w, v)
	}
	return w
}

// scriptConn is one accepted connection, positioned after the request line.
type scriptConn struct {
	t    *testing.T
	v    wireCheck
	conn net.Conn
	r    *bufio.Reader

	line []byte // the request line, without its newline
	req  struct {
		ID     string          `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	hungUp bool // the handler closed the connection itself
}

// reply writes a response line after checking it against herdr's schema, so
// that scripts cannot drift from what herdr really sends.
func (c *scriptConn) reply(line string) {
	c.t.Helper()
	if err := c.v.Response([]byte(line)); err != nil {
		c.t.Errorf("scripted response is not valid herdr: %v", err)
	}
	c.writeRaw(line + "\n")
}

// result replies {"id":<request id>,"result":<result>}.
func (c *scriptConn) result(result string) {
	c.t.Helper()
	id, _ := json.Marshal(c.req.ID)
	c.reply(`{"id":` + string(id) + `,"result":` + result + `}`)
}

// fail replies with herdr's error envelope for the request.
func (c *scriptConn) fail(code, message string) {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"id": c.req.ID, "error": map[string]string{"code": code, "message": message}})
	c.reply(string(body))
}

// event writes one stream line after checking it against herdr's schema.
func (c *scriptConn) event(line string) {
	c.t.Helper()
	if err := c.v.StreamLine([]byte(line)); err != nil {
		c.t.Errorf("scripted stream line is not valid herdr: %v", err)
	}
	c.writeRaw(line + "\n")
}

func (c *scriptConn) writeRaw(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, s); err != nil {
		c.t.Errorf("server write: %v", err)
	}
}

// hangUp closes the connection from herdr's side.
func (c *scriptConn) hangUp() {
	c.hungUp = true
	c.conn.Close()
}

// assertStillOpen checks, without blocking, that the client neither sent
// more bytes after its request line nor half-closed its end (herdr's
// peer-closed probe reads EOF or any byte as "client gone").
func (c *scriptConn) assertStillOpen() {
	c.t.Helper()
	if n := c.r.Buffered(); n > 0 {
		extra, _ := c.r.Peek(n)
		c.t.Errorf("client pipelined %q after the request line", extra)
		return
	}
	c.conn.SetReadDeadline(time.Now()) // an immediate, non-blocking probe like herdr's
	defer c.conn.SetReadDeadline(time.Time{})
	var b [1]byte
	n, err := c.r.Read(b[:])
	var ne net.Error
	if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
		c.t.Errorf("probe after the request line read %q, %v; want nothing pending (client wrote or half-closed)", b[:n], err)
	}
}

// awaitClientClose blocks until the client closes its end and fails the test
// if the client sent anything at all after the request line.
func (c *scriptConn) awaitClientClose() {
	c.t.Helper()
	rest, err := io.ReadAll(c.r)
	if len(rest) > 0 {
		c.t.Errorf("client wrote %q after the request line", rest)
	}
	if err != nil {
		c.t.Errorf("reading after the request line: %v", err)
	}
}

type scriptServer struct {
	path     string
	accepted atomic.Int32
	mu       sync.Mutex
	lines    [][]byte // every request line received, in order
}

func (s *scriptServer) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.lines...)
}

type serverOptions struct {
	skipValidation bool // for the test that proves the validator rejects bad requests
	// protocol, when set, checks the exchange against that protocol's
	// schema only (a method only protocol 22 has); 0 checks every one.
	protocol int
}

// startServer serves handler on a fresh socket until the test ends. After the
// handler returns (unless it hung up) the server waits for the client to
// close and asserts that no byte followed the request line.
func startServer(t *testing.T, handler func(c *scriptConn)) *scriptServer {
	return startServerOpts(t, serverOptions{}, handler)
}

func startServerOpts(t *testing.T, opts serverOptions, handler func(c *scriptConn)) *scriptServer {
	t.Helper()
	v := mustValidator(t)
	if opts.protocol != 0 {
		v = slices.DeleteFunc(v, func(x *schemacheck.Validator) bool { return x.Protocol() != opts.protocol })
	}
	s := &scriptServer{path: filepath.Join(t.TempDir(), "herdr.sock")}
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			wg.Go(func() {
				defer conn.Close()
				c := &scriptConn{t: t, v: v, conn: conn, r: bufio.NewReader(conn)}
				line, err := c.r.ReadBytes('\n')
				if err != nil {
					t.Errorf("server read request line: %v (got %q)", err, line)
					return
				}
				c.line = line[:len(line)-1]
				s.mu.Lock()
				s.lines = append(s.lines, c.line)
				s.mu.Unlock()
				if !opts.skipValidation {
					if err := v.Request(c.line); err != nil {
						t.Errorf("client sent a request herdr's schema rejects: %v", err)
					}
				}
				if err := json.Unmarshal(c.line, &c.req); err != nil {
					t.Errorf("decode request %q: %v", c.line, err)
				}
				c.assertStillOpen()
				handler(c)
				if !c.hungUp {
					c.awaitClientClose()
				}
			})
		}
	})
	return s
}

// errorsAsHerdr returns the *Error in err's chain, or nil.
func errorsAsHerdr(err error) *Error {
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	return nil
}

// connRecord is what the client did to one connection.
type connRecord struct {
	mu         sync.Mutex
	written    []byte
	halfClosed bool
}

type recordingConn struct {
	net.Conn
	rec *connRecord
}

func (r *recordingConn) Write(b []byte) (int, error) {
	r.rec.mu.Lock()
	r.rec.written = append(r.rec.written, b...)
	r.rec.mu.Unlock()
	return r.Conn.Write(b)
}

// CloseWrite exists so that a client half-closing through an interface
// assertion is recorded (one asserting *net.UnixConn would panic here).
func (r *recordingConn) CloseWrite() error {
	r.rec.mu.Lock()
	r.rec.halfClosed = true
	r.rec.mu.Unlock()
	return r.Conn.(*net.UnixConn).CloseWrite()
}

// newClient returns a client for opts whose connections are recorded; when
// the test ends it asserts that on every connection the client wrote exactly
// one newline-terminated line and never half-closed.
func newClient(t *testing.T, opts *Options) *Client {
	t.Helper()
	c := New(opts)
	var mu sync.Mutex
	var recs []*connRecord
	dial := c.dial
	c.dial = func(ctx context.Context) (net.Conn, error) {
		conn, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		rec := &connRecord{}
		mu.Lock()
		recs = append(recs, rec)
		mu.Unlock()
		return &recordingConn{Conn: conn, rec: rec}, nil
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for i, rec := range recs {
			rec.mu.Lock()
			w := rec.written
			if bytes.Count(w, []byte("\n")) != 1 || !bytes.HasSuffix(w, []byte("\n")) {
				t.Errorf("connection %d: client wrote %q, want exactly one request line", i, w)
			}
			if rec.halfClosed {
				t.Errorf("connection %d: client half-closed (CloseWrite); herdr reads that as a hang-up", i)
			}
			rec.mu.Unlock()
		}
	})
	return c
}
