package listener

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// The listener tests run NewServer on a real loopback socket and talk
// to it with raw connections. Nothing sleeps: a test that expects the
// server to close a connection reads from it with a generous deadline and
// wants EOF (or a reset) long before the deadline, which it only gets if
// the server closed it.

// closedWithin is how long a test waits for the server to close a
// connection whose bound (tens of milliseconds) has passed.
const closedWithin = 10 * time.Second

// serveBounded serves handler within limits on a fresh loopback listener
// until the test ends, and returns its address.
func serveBounded(t *testing.T, handler http.Handler, limits Limits) string {
	t.Helper()
	return serveWatched(t, handler, limits, nil)
}

// serveWatched is serveBounded that also tells seen (if not nil) of every
// connection state the server reports, after the listener's own ConnState
// hook has seen it: once seen has it, so has the cap.
func serveWatched(t *testing.T, handler http.Handler, limits Limits, seen func(net.Conn, http.ConnState)) string {
	t.Helper()
	limits, err := (&limits).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, ln := NewServer(handler, raw, limits, slog.New(slog.DiscardHandler))
	if seen != nil {
		track := srv.ConnState
		srv.ConnState = func(c net.Conn, s http.ConnState) {
			track(c, s)
			seen(c, s)
		}
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return raw.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitClosed reads c until the server closes it; it fails the test if c is
// still open after closedWithin. It returns what was read.
func waitClosed(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(closedWithin))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v (read %q)", closedWithin, b)
	}
	return string(b) // EOF, or a reset: closed by the server either way
}

// reported waits until the server has reported c on states, the client
// addresses of connections that went into a state in the order the server
// saw them.
func reported(t *testing.T, states <-chan string, c net.Conn) {
	t.Helper()
	timeout := time.After(closedWithin)
	for {
		select {
		case a := <-states:
			if a == c.LocalAddr().String() {
				return
			}
		case <-timeout:
			t.Fatalf("the server never reported %s", c.LocalAddr())
		}
	}
}

// get sends a GET on c and reads its response.
func get(t *testing.T, c net.Conn, path string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(closedWithin))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })

func TestListener_ClosesConnectionsThatSendNothing(t *testing.T) {
	addr := serveBounded(t, okHandler, Limits{ReadHeaderTimeout: 50 * time.Millisecond})
	silent := dial(t, addr)
	waitClosed(t, silent)

	// Half a request line is no better than nothing.
	partial := dial(t, addr)
	io.WriteString(partial, "GET /healthz HTTP/1.1\r\nHost: 127.0")
	waitClosed(t, partial)
}

func TestListener_ClosesIdleKeptAliveConnections(t *testing.T) {
	addr := serveBounded(t, okHandler, Limits{IdleTimeout: 50 * time.Millisecond})
	c := dial(t, addr)
	if resp := get(t, c, "/healthz"); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET = %s (close %v), want 200 on a kept-alive connection", resp.Status, resp.Close)
	}
	waitClosed(t, c)
}

func TestListener_CutsASlowBody(t *testing.T) {
	read := make(chan error, 1)
	h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
	})
	addr := serveBounded(t, h, Limits{ReadTimeout: 50 * time.Millisecond})
	c := dial(t, addr)
	io.WriteString(c, "POST /members HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("the handler read a whole body that never arrived")
		}
	case <-time.After(closedWithin):
		t.Fatal("the body read was not cut")
	}
	waitClosed(t, c)
}

func TestListener_CutsAClientThatStopsReading(t *testing.T) {
	wrote := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Far more than the socket buffers hold: the writes block until
		// the client reads, or their deadline passes.
		chunk := make([]byte, 1<<20)
		var err error
		for i := 0; i < 256 && err == nil; i++ {
			_, err = w.Write(chunk)
		}
		wrote <- err
	})
	addr := serveBounded(t, h, Limits{WriteTimeout: 50 * time.Millisecond})
	c := dial(t, addr)
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	select {
	case err := <-wrote:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write to a client that reads nothing = %v, want the deadline exceeded", err)
		}
	case <-time.After(closedWithin):
		t.Fatal("a write to a client that reads nothing was never cut")
	}
}

func TestListener_AtTheCapTheLongestIdleConnectionMakesRoom(t *testing.T) {
	idle := make(chan string, 16) // the client addresses of connections gone idle
	// Headers may take a minute and idle connections stay for one: only
	// the cap decides here.
	addr := serveWatched(t, okHandler, Limits{MaxConns: 2, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute},
		func(c net.Conn, s http.ConnState) {
			if s == http.StateIdle {
				idle <- c.RemoteAddr().String()
			}
		})
	silent := dial(t, addr)
	keptAlive := dial(t, addr)
	if resp := get(t, keptAlive, "/healthz"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %s, want 200", resp.Status)
	}
	// net/http reports a connection idle only after it has flushed the
	// response, so the client can read it first. Until then the cap
	// rightly counts keptAlive busy, and, with the server's goroutine
	// descheduled long enough, would close the third connection (idle
	// sooner by its count) for the fourth.
	reported(t, idle, keptAlive)
	// A third connection is served at once: the one idle longest (silent
	// since it connected) is closed to make room, then the next.
	if resp := get(t, dial(t, addr), "/healthz"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET over the cap = %s, want 200", resp.Status)
	}
	waitClosed(t, silent)
	if resp := get(t, dial(t, addr), "/healthz"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET over the cap = %s, want 200", resp.Status)
	}
	waitClosed(t, keptAlive)
}

func TestListener_AtTheCapWithEveryConnectionBusyNewOnesWait(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok\n")
	})
	addr := serveBounded(t, h, Limits{MaxConns: 2})
	held := []net.Conn{dial(t, addr), dial(t, addr)}
	for _, c := range held {
		io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		select {
		case <-entered:
		case <-time.After(closedWithin):
			t.Fatal("a held request never reached the handler")
		}
	}

	// A third connection gets through the kernel's accept queue but is not
	// served while both have a request in flight; neither is cut for it.
	third := dial(t, addr)
	io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	br := bufio.NewReader(third)
	third.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := br.Peek(1); err == nil {
		t.Fatal("a connection over the cap was served while every connection was busy")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("a connection over the cap: %v, want it queued", err)
	}

	// Once a held request ends, its connection goes idle and makes room.
	release <- struct{}{}
	third.SetReadDeadline(time.Now().Add(closedWithin))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("queued connection after a request ended: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("queued GET = %s, want 200", resp.Status)
	}
	close(release)
}

func TestListener_LimitsHeaderSize(t *testing.T) {
	addr := serveBounded(t, okHandler, Limits{MaxHeaderBytes: 1 << 10})
	c := dial(t, addr)
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "+strings.Repeat("a", 64<<10)+"\r\n\r\n")
	if got := waitClosed(t, c); !strings.HasPrefix(got, "HTTP/1.1 431") {
		t.Fatalf("64 KiB of headers got %.40q, want 431 and the connection closed", got)
	}
}

func TestLimits_RefusesNegativeBounds(t *testing.T) {
	for _, l := range []Limits{{MaxConns: -1}, {IdleTimeout: -time.Second}, {ReadTimeout: -1}, {MaxHeaderBytes: -5}} {
		if _, err := (&l).WithDefaults(); err == nil {
			t.Errorf("WithDefaults(%+v) = nil error, want one naming the bound", l)
		}
	}
}

// slowBody sends a request that announces a body of 200000 bytes and sends
// two of them: a client feeding its body a few bytes at a time.
func slowBody(t *testing.T, c net.Conn, path, auth string) {
	t.Helper()
	if auth != "" {
		auth = "Authorization: Bearer " + auth + "\r\n"
	}
	if _, err := io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"+auth+"Content-Type: application/json\r\nContent-Length: 200000\r\n\r\n{\""); err != nil {
		t.Fatal(err)
	}
}

// readResponse reads one response from c and returns it with its body.
func readResponse(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(closedWithin))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// An answer given before the request's body is in (a 401 to a client that
// announced 200 KB and sends it a byte at a time, or a 413 once the body
// passed its bound) closes the connection at once: the rest of the body is
// never waited for, however long the read timeout.
func TestListener_AnAnswerBeforeTheBodyClosesTheConnectionAtOnce(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		send    string
		status  int
	}{{
		name: "401 without reading the body",
		handler: func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "no token", http.StatusUnauthorized)
		},
		status: http.StatusUnauthorized,
	}, {
		name: "413 once the body passed its bound",
		handler: func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1)); err != nil {
				http.Error(w, "too large", http.StatusRequestEntityTooLarge)
				return
			}
			io.WriteString(w, "read it all\n")
		},
		status: http.StatusRequestEntityTooLarge,
	}, {
		name: "404 without reading the body",
		handler: func(w http.ResponseWriter, _ *http.Request) {
			http.NotFound(w, nil)
		},
		status: http.StatusNotFound,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := serveBounded(t, tt.handler, Limits{ReadTimeout: time.Hour})
			c := dial(t, addr)
			slowBody(t, c, "/members", "")
			resp, _ := readResponse(t, c)
			if resp.StatusCode != tt.status || !resp.Close {
				t.Fatalf("answer %s (Connection: close %v), want %d and the connection closed", resp.Status, resp.Close, tt.status)
			}
			waitClosed(t, c)
		})
	}
}

// A 401 closes its connection even when the request had no body.
func TestListener_A401ClosesItsConnection(t *testing.T) {
	addr := serveBounded(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no token", http.StatusUnauthorized)
	}), Limits{IdleTimeout: time.Hour})
	c := dial(t, addr)
	if resp := get(t, c, "/members"); resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Fatalf("GET = %s (close %v), want 401 and Connection: close", resp.Status, resp.Close)
	}
	waitClosed(t, c)
}

// At the cap, when no connection is idle, the one whose request body has
// been arriving longest is closed to make room — slow bodies hold no slot
// a probe needs — while a call whose request was read in full is never
// closed for room.
func TestListener_AtTheCapAConnectionStillSendingItsBodyMakesRoom(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok\n")
	})
	active := make(chan string, 16) // the client addresses of connections whose headers were read
	addr := serveWatched(t, h, Limits{MaxConns: 3, ReadTimeout: time.Hour, ReadHeaderTimeout: time.Hour},
		func(c net.Conn, s http.ConnState) {
			if s == http.StateActive {
				active <- c.RemoteAddr().String()
			}
		})
	held := dial(t, addr)
	io.WriteString(held, "POST /hold HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
	<-entered
	// Two slow bodies fill the cap; each probe closes the one arriving
	// longest, and a new slow body takes its place.
	slow := []net.Conn{dial(t, addr), dial(t, addr)}
	for _, c := range slow {
		slowBody(t, c, "/upload", "")
		reported(t, active, c)
	}
	for range 2 {
		probe := dial(t, addr)
		// The probe closes its connection after its answer, so that the
		// next one finds no idle connection to close.
		io.WriteString(probe, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		if resp, _ := readResponse(t, probe); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET over the cap = %s, want 200", resp.Status)
		}
		waitClosed(t, slow[0])
		waitClosed(t, probe)
		next := dial(t, addr)
		slowBody(t, next, "/upload", "")
		reported(t, active, next)
		slow = append(slow[1:], next)
	}
	// The held call is still there, and answers when released.
	release <- struct{}{}
	if resp, body := readResponse(t, held); resp.StatusCode != http.StatusOK || body != "ok\n" {
		t.Fatalf("held call = %s %q, want 200 ok", resp.Status, body)
	}
}

// At the cap, a connection whose client stopped reading its answer is
// closed to make room, long before the write deadline would cut it; a call
// that waits for its outcome is not.
func TestListener_AtTheCapAClientThatStoppedReadingMakesRoom(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hold":
			entered <- struct{}{}
			<-release
		case "/big":
			// Far more than the socket buffers hold.
			chunk := make([]byte, 1<<20)
			for i := 0; i < 256; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}
		io.WriteString(w, "ok\n")
	})
	addr := serveBounded(t, h, Limits{MaxConns: 2, WriteTimeout: time.Hour})
	held := dial(t, addr)
	io.WriteString(held, "GET /hold HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	<-entered
	stalled := dial(t, addr)
	io.WriteString(stalled, "GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") // and never read

	probe := dial(t, addr)
	io.WriteString(probe, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
	if resp, _ := readResponse(t, probe); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET over the cap = %s, want 200", resp.Status)
	}
	stalled.SetReadDeadline(time.Now().Add(closedWithin))
	// EOF (or a reset) before the whole answer: closed by the server.
	n, err := io.Copy(io.Discard, stalled)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() || n >= 256<<20 {
		t.Fatalf("the stalled connection read %d bytes, then %v; want it closed before its answer", n, err)
	}
	release <- struct{}{}
	if resp, body := readResponse(t, held); resp.StatusCode != http.StatusOK || body != "ok\n" {
		t.Fatalf("held call = %s %q, want 200 ok", resp.Status, body)
	}
}

// TestListener_AClientThatWritesItsWholeBodyReadsAnEarlyAnswer: a client
// that sends a large body before it reads (net/http's client, curl) gets
// the answer the handler gave without reading the body (a 413 here), not a
// connection reset — the body's rest is read for a moment after the
// answer, so the connection is not closed with data unread in it.
func TestListener_AClientThatWritesItsWholeBodyReadsAnEarlyAnswer(t *testing.T) {
	tooLarge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})
	addr := serveBounded(t, tooLarge, Limits{})
	body := bytes.Repeat([]byte("x"), 3<<20)
	for i := range 10 {
		resp, err := http.Post("http://"+addr+"/members", "application/yaml", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("post %d: %v; want the 413", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
			t.Fatalf("post %d: %d (close %v); want 413 and the connection closed", i, resp.StatusCode, resp.Close)
		}
	}
}
