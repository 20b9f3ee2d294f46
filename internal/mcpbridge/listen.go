package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/fleetd-dev/fleetd/internal/sse"
)

// maxEventSize bounds one server-sent event, like the go-sdk's default
// frame limit.
const maxEventSize = 16 << 20

// listen holds the standalone SSE stream (an HTTP GET on the endpoint) on
// which a gateway speaking a pre-2026-07-28 protocol sends requests and
// notifications that belong to no request of ours, and relays them to the
// harness. The go-sdk transport opens this stream only for sessions its own
// client runs, so the relay opens it itself.
//
// A gateway that offers no such stream (405, another 4xx, or no
// text/event-stream) is fine: the relay goes on without it. A stream that
// breaks is resumed with Last-Event-ID; after maxRetries attempts without a
// new event the session is considered lost.
func (r *relay) listen(ctx context.Context, sessionID string) {
	var lastEventID string
	failures := 0
	for {
		resp, err := r.openStream(ctx, sessionID, lastEventID)
		if ctx.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return
		}
		if err != nil {
			if fatal := r.classify(err); fatal != nil && errors.Is(fatal, ErrTokenRefused) {
				r.stop(fatal)
				return
			}
		} else if resp == nil {
			return // the gateway offers no standalone stream
		} else {
			var progressed bool
			progressed, err = r.relayEvents(ctx, resp.Body, &lastEventID)
			resp.Body.Close()
			if ctx.Err() != nil {
				return
			}
			if progressed {
				failures = 0
			}
			if err == nil {
				err = errors.New("stream ended")
			}
		}
		var fatal *streamFatal
		if errors.As(err, &fatal) {
			r.stop(fatal.err)
			return
		}
		failures++
		if failures > r.maxRetries {
			r.stop(fmt.Errorf("standalone stream from the gateway at %s lost after %d attempts: %w", r.opts.URL, r.maxRetries, err))
			return
		}
		r.opts.Logger.Warn("standalone stream from the gateway interrupted; reconnecting", "err", err, "attempt", failures)
		t := time.NewTimer(r.retryDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// openStream issues the GET. It returns (nil, nil) when the gateway answers
// that it has no standalone stream.
func (r *relay) openStream(ctx context.Context, sessionID, lastEventID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.opts.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if sessionID != "" {
		req.Header.Set(sessionIDHeader, sessionID)
	}
	if lastEventID != "" {
		req.Header.Set(lastEventIDHeader, lastEventID)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500, mediaType != "text/event-stream" && resp.StatusCode < 300:
		resp.Body.Close()
		return nil, nil
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		resp.Body.Close()
		return nil, fmt.Errorf("standalone stream: %s", resp.Status)
	}
	return resp, nil
}

// streamFatal marks a stream failure that reconnecting cannot fix: an event
// that is not JSON-RPC, or a harness that no longer reads.
type streamFatal struct{ err error }

func (e *streamFatal) Error() string { return e.err.Error() }

// relayEvents reads the server-sent events in body and writes the data of
// each message event (the default type; MCP sends no other) to the harness
// as a JSON-RPC message, keeping lastEventID at the last id the stream
// gave. It reports whether any event arrived. An event the stream cut off
// is not relayed: the next GET resumes after the last whole one.
func (r *relay) relayEvents(ctx context.Context, body io.Reader, lastEventID *string) (progressed bool, err error) {
	rd := sse.NewReader(body, maxEventSize)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return progressed, nil
		}
		if err != nil {
			return progressed, err
		}
		progressed = true
		if ev.ID != "" {
			*lastEventID = ev.ID
		}
		if ev.Name != "" && ev.Name != "message" {
			continue
		}
		msg, err := jsonrpc.DecodeMessage(ev.Data)
		if err != nil {
			return progressed, &streamFatal{fmt.Errorf("decode event on the standalone stream from the gateway at %s: %w", r.opts.URL, err)}
		}
		if err := r.stdio.Write(ctx, msg); err != nil {
			return progressed, &streamFatal{fmt.Errorf("write to stdout: %w", err)}
		}
	}
}
