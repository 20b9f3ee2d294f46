package mcp

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// heldSend is a messenger whose Send holds until its context ends (or the
// test ends), as a bridge_send with wait holds until the worker answers.
type heldSend struct {
	fakeMessenger
	started chan struct{}
	ended   chan error
	stop    chan struct{}
}

func (h *heldSend) Send(ctx context.Context, _ messaging.SendRequest) (messaging.SendResult, error) {
	close(h.started)
	select {
	case <-ctx.Done():
		h.ended <- ctx.Err()
		return messaging.SendResult{}, ctx.Err()
	case <-h.stop:
		return messaging.SendResult{}, fmt.Errorf("test over")
	}
}

// A held call whose client goes away (its connection closes) ends: the SDK
// would keep it running for a resumption that, without an event store,
// never comes, and the outcome it waits for would reach nobody.
func TestGateway_HeldCallEndsWhenItsClientGoes(t *testing.T) {
	m := &heldSend{started: make(chan struct{}), ended: make(chan error, 1), stop: make(chan struct{})}
	srv, _ := startGateway(t, m)
	t.Cleanup(func() { close(m.stop) }) // runs before the server closes
	cs, err := connect(t, srv.URL, "primary-secret")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bridge_send","arguments":{"sessionId":"a","content":"x","wait":true}}}`
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer primary-secret\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\nContent-Length: %d\r\n\r\n%s",
		u.Host, cs.ID(), cs.InitializeResult().ProtocolVersion, len(body), body)
	bound := time.NewTimer(10 * time.Second) // a bound for a broken gateway, never a pause
	defer bound.Stop()
	select {
	case <-m.started:
	case <-bound.C:
		t.Fatal("bridge_send never reached the messenger")
	}
	conn.Close()
	select {
	case err := <-m.ended:
		if err == nil {
			t.Error("the held call ended without a context error")
		}
	case <-bound.C:
		t.Fatal("the held bridge_send went on after its client's connection closed")
	}
}
