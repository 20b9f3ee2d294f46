package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/fleetd-dev/fleetd/internal/sse"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// openStream starts GET path as an event stream, read as it arrives: no
// overall timeout, the stream lasts as long as ctx (its reader bounds the
// silence it takes). A non-2xx answer is an *HTTPError, as from Get.
func (c *Client) openStream(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.server+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	hc := &http.Client{Transport: c.http.Transport}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, responseError(resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("fleetd at %s answered %s with %s, not an event stream: it is older than this client; upgrade it", c.server, path, termtext.Line(ct))
	}
	return resp.Body, nil
}

// eventReader reads a stream's events, each at most max bytes.
type eventReader struct {
	r   *sse.Reader
	max int
}

func newEventReader(r io.Reader, max int) *eventReader {
	return &eventReader{r: sse.NewReader(r, max), max: max}
}

// next returns the next event; io.EOF at the end of the stream. An event
// over the bound is an error saying so; it matches sse.ErrTooLong.
func (r *eventReader) next() (sse.Event, error) {
	ev, err := r.r.Next()
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return ev, err
	case errors.Is(err, sse.ErrTooLong):
		return ev, &tooLongError{max: r.max}
	}
	return ev, fmt.Errorf("read the stream: %w", err)
}

// tooLongError is an event over a stream's bound.
type tooLongError struct{ max int }

func (e *tooLongError) Error() string { return fmt.Sprintf("an event longer than %d bytes", e.max) }
func (e *tooLongError) Unwrap() error { return sse.ErrTooLong }
