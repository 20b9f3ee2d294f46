package herdr

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// WroteRequest runs once per call, after herdr has the request line and
// before the client reads the answer: the herdr at the other end of the
// pipe answers only once the hook has run, so a hook run after the answer
// was read (or not at all) leaves the call waiting until the test's 5 s
// are up, and it fails. It is not called when the request never left.
func TestClientTrace_WroteRequestRunsBeforeTheAnswerIsRead(t *testing.T) {
	wrote := make(chan struct{}, 1)
	var got []string // the request lines herdr had when each hook ran
	received := make(chan string, 1)
	dial := func(ctx context.Context) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			line, err := bufio.NewReader(server).ReadBytes('\n')
			if err != nil {
				return
			}
			received <- string(line)
			select {
			case <-wrote:
			case <-ctx.Done():
				return
			}
			var req struct{ ID string }
			json.Unmarshal(line, &req)
			server.Write([]byte(`{"id":"` + req.ID + `","result":{"type":"ok"}}` + "\n"))
		}()
		return client, nil
	}
	c := New(&Options{Dial: dial})
	calls := 0
	base, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ctx := WithClientTrace(base, &ClientTrace{WroteRequest: func() {
		calls++
		got = append(got, <-received)
		wrote <- struct{}{}
	}})
	for _, pane := range []string{"w1:p1", "w1:p2"} {
		if err := c.ClosePane(ctx, pane); err != nil {
			t.Fatalf("close pane %s: %v", pane, err)
		}
	}
	if calls != 2 || len(got) != 2 {
		t.Fatalf("WroteRequest ran %d times (herdr had %q), want once per call", calls, got)
	}

	refused := New(&Options{Dial: func(context.Context) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "pipe", Err: syscall.ECONNREFUSED}
	}})
	if err := refused.ClosePane(ctx, "w1:p1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if calls != 2 {
		t.Errorf("WroteRequest ran for a request that was never written")
	}
}
