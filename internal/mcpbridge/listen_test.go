package mcpbridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// stdoutRelay returns a relay whose harness side writes to out.
func stdoutRelay(t *testing.T, out io.Writer, gatewayURL string) *relay {
	t.Helper()
	stdio, err := (&mcp.IOTransport{Reader: io.NopCloser(strings.NewReader("")), Writer: nopWriteCloser{out}}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdio.Close() })
	client, _ := newAuthClient(t, gatewayURL, "tok")
	_, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &relay{
		opts:       Options{URL: gatewayURL, TokenEnv: "FLEETD_TOKEN", Logger: slog.New(slog.DiscardHandler)},
		client:     client,
		stdio:      stdio,
		cancel:     cancel,
		maxRetries: 2,
	}
}

func TestRelayEvents_ParsesTheEventStream(t *testing.T) {
	stream := strings.Join([]string{
		": ok", // comment
		"",
		"id: 1",
		`data: {"jsonrpc":"2.0","method":"notifications/a"}`,
		"",
		"event: ping", // not a message event: skipped
		`data: {"jsonrpc":"2.0","method":"notifications/skipped"}`,
		"",
		"id: 2\r",
		`data: {"jsonrpc":"2.0",` + "\r",
		`data:"method":"notifications/b"}` + "\r", // no space after the colon
		"\r",
		`data: {"jsonrpc":"2.0","id":7,"method":"roots/list"}`,
		"",
		"id: 3",
		`data: {"jsonrpc":"2.0","method":"notifications/cut"}`, // cut off by the end of the stream: not relayed
	}, "\n")
	var out syncbuf.Buffer
	r := stdoutRelay(t, &out, "http://127.0.0.1:1/mcp")
	var last string
	progressed, err := r.relayEvents(context.Background(), strings.NewReader(stream), &last)
	if err != nil {
		t.Fatalf("relayEvents: %v", err)
	}
	if !progressed || last != "2" {
		t.Errorf("progressed, last event id = %v, %q; want true, \"2\" (the id of the last whole event)", progressed, last)
	}
	want := `{"jsonrpc":"2.0","method":"notifications/a"}
{"jsonrpc":"2.0","method":"notifications/b"}
{"jsonrpc":"2.0","id":7,"method":"roots/list"}
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("messages written to the harness (-want +got):\n%s", diff)
	}
}

func TestRelayEvents_MalformedEventIsFatal(t *testing.T) {
	r := stdoutRelay(t, io.Discard, "http://127.0.0.1:1/mcp")
	var last string
	_, err := r.relayEvents(context.Background(), strings.NewReader("data: {not json\n\n"), &last)
	var fatal *streamFatal
	if !errors.As(err, &fatal) {
		t.Errorf("relayEvents on a malformed event = %v, want a fatal stream error", err)
	}
}

// A standalone stream the gateway drops is resumed with the id of the last
// whole event as Last-Event-ID. A stream cut in the middle of an event is
// resumed before that event: the cut event is neither relayed in part
// (which is not JSON-RPC and would end the relay) nor skipped (its id was
// read, but the event was not received); the resumed stream's copy of it
// is relayed whole.
func TestListen_ResumesAfterTheLastWholeEvent(t *testing.T) {
	const n1, n2 = `{"jsonrpc":"2.0","method":"notifications/n1"}`, `{"jsonrpc":"2.0","method":"notifications/n2"}`
	for name, first := range map[string]string{
		"dropped between events": "id: ev-1\ndata: " + n1 + "\n\n",
		"cut mid-event":          "id: ev-1\ndata: " + n1 + "\n\nid: ev-2\ndata: " + n2[:20],
	} {
		t.Run(name, func(t *testing.T) {
			var (
				mu          sync.Mutex
				lastEventID []string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				lastEventID = append(lastEventID, r.Header.Get(lastEventIDHeader))
				n := len(lastEventID)
				mu.Unlock()
				if r.Header.Get(sessionIDHeader) != "sess-1" {
					http.Error(w, "no session", http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				if n == 1 {
					fmt.Fprint(w, first) // then the gateway drops the stream
					return
				}
				fmt.Fprint(w, "id: ev-2\ndata: "+n2+"\n\n")
				w.(http.Flusher).Flush()
				<-r.Context().Done() // hold the resumed stream open
			}))
			defer srv.Close()

			outR, outW := io.Pipe()
			defer outR.Close()
			r := stdoutRelay(t, outW, srv.URL)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				r.listen(ctx, "sess-1")
				close(done)
				outW.Close() // a relay that gave up ends the harness's output
			}()
			lines := bufio.NewScanner(outR)
			var got []string
			for range 2 {
				if !lines.Scan() {
					t.Fatalf("harness got %q, then the relay ended: %v", got, r.result())
				}
				got = append(got, lines.Text())
			}
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("listen did not return after cancel")
			}
			if err := r.result(); err != nil {
				t.Errorf("relay result = %v; want none (a dropped stream is resumed)", err)
			}
			if diff := cmp.Diff([]string{n1, n2}, got); diff != "" {
				t.Errorf("messages relayed (-want +got):\n%s", diff)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]string{"", "ev-1"}, lastEventID); diff != "" {
				t.Errorf("Last-Event-ID of each GET (-want +got):\n%s", diff)
			}
		})
	}
}

// A gateway without a standalone stream is not an error.
func TestListen_NoStandaloneStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}))
	defer srv.Close()
	r := stdoutRelay(t, io.Discard, srv.URL)
	r.listen(context.Background(), "")
	if err := r.result(); err != nil {
		t.Errorf("relay result after a 405 = %v, want none", err)
	}
}
