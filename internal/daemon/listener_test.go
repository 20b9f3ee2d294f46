package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/listener"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/mcp"
)

// The listener's own tests are in internal/listener; these check that the
// daemon serves through it.

func TestRun_RefusesANegativeListenerBound(t *testing.T) {
	t.Parallel()
	err := Run(context.Background(), Config{ManifestsDir: t.TempDir(), StateDir: t.TempDir(), Listener: &listener.Limits{WriteTimeout: -1}})
	if err == nil || !strings.Contains(err.Error(), "WriteTimeout") {
		t.Errorf("Run with a negative WriteTimeout = %v, want an error naming it", err)
	}
}

// waitClosed reads c until the server closes it; it fails the test if c is
// still open after 10s.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after 10s (read %q)", b)
	}
}

func TestListener_HeldCallOutlivesTheTimeouts(t *testing.T) {
	t.Parallel()
	// Reading a request and each write are bounded by 200ms; a silent
	// connection is closed after 400ms.
	limits := &listener.Limits{ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, ReadHeaderTimeout: 400 * time.Millisecond}
	f := startFleetConfig(t, "", Config{Listener: limits, Messaging: &messaging.Options{PickupGrace: 10 * time.Minute}})
	w := f.spawn("coder")
	sent := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "do X", "sessionId": "coder"})
	f.prompt(w) // the primary's call is held from here until the reply

	// A silent connection opened now is closed after 400ms: once it is,
	// the call has been held longer than the read and write bounds.
	u, err := url.Parse(f.info.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitClosed(t, c)

	reply := callOK[mcp.ReplyOutput](f, w.sess, "bridge_reply", map[string]any{"content": "result"})
	out := waitOK(t, f.ctx, sent)
	if out.Outcome != "reply" || out.Text != "result" || out.TurnID != reply.TurnID {
		t.Fatalf("held bridge_send = %+v, want the reply %q of turn %s", out, "result", reply.TurnID)
	}
}
