package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// DefaultServer is where `fleetd serve` listens unless told otherwise.
const DefaultServer = "http://127.0.0.1:8080"

// requestTimeout bounds one request that is not held or streamed.
const requestTimeout = 30 * time.Second

// heldCallMargin is how much longer than fleetd's own timeout a held call
// (an inbox poll that waits, bridge_send) waits for its answer, so that
// fleetd's timeout outcome arrives first.
const heldCallMargin = 30 * time.Second

// Client calls a running fleetd as the holder of one token.
type Client struct {
	server string // base URL, without a trailing slash
	token  string
	http   *http.Client
}

// New returns a client of the fleetd at server (a base URL such as
// DefaultServer) that authenticates with token.
func New(server, token string) *Client {
	return &Client{server: strings.TrimRight(server, "/"), token: token, http: &http.Client{Timeout: requestTimeout}}
}

// Server is the base URL of the fleetd c calls.
func (c *Client) Server() string { return c.server }

// WithTimeout returns a copy of c whose requests each end after d.
func (c *Client) WithTimeout(d time.Duration) *Client {
	cc := *c
	hc := *c.http
	hc.Timeout = d
	cc.http = &hc
	return &cc
}

// Get fetches path and decodes the JSON body into out.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	_, err := c.do(ctx, http.MethodGet, path, nil, out)
	return err
}

// Post sends body as JSON to path and decodes the JSON answer into out; it
// returns the HTTP status of a 2xx answer.
func (c *Client) Post(ctx context.Context, path string, body any, out any) (int, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, fmt.Errorf("encode request to %s: %w", path, err)
	}
	return c.do(ctx, http.MethodPost, path, data, out)
}

// Delete sends DELETE to path and decodes the JSON answer into out.
func (c *Client) Delete(ctx context.Context, path string, out any) error {
	_, err := c.do(ctx, http.MethodDelete, path, nil, out)
	return err
}

// do makes one authenticated request (with a JSON body when body is not
// nil) and decodes a 2xx JSON answer into out. A non-2xx answer is an
// *HTTPError.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, c.unreachable(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("read response from %s: %w", c.server, err)
	}
	if resp.StatusCode/100 != 2 {
		return 0, responseError(resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return 0, fmt.Errorf("decode response from %s%s: %w", c.server, path, err)
	}
	return resp.StatusCode, nil
}

// unreachable is a failed request's error: fleetd is not there.
func (c *Client) unreachable(err error) error {
	return fmt.Errorf("cannot reach fleetd at %s (is `fleetd serve` running?): %w", c.server, errors.Unwrap(err))
}

// HTTPError is fleetd's non-2xx answer: its status, and the code word and
// message of its JSON error body (or the body itself).
type HTTPError struct {
	Status  int
	Code    string // "" when the body was not fleetd's error JSON
	Message string
}

// Error is the server's message, safe for a terminal on one line (package
// termtext): it may quote a name or a value someone else wrote.
func (e *HTTPError) Error() string {
	if e.Code != "" {
		return termtext.Line(fmt.Sprintf("%s (%s)", e.Message, e.Code))
	}
	return termtext.Line(fmt.Sprintf("HTTP %d: %s", e.Status, e.Message))
}

// responseError is the *HTTPError of a non-2xx answer with body data.
func responseError(status int, data []byte) error {
	var apiErr struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(data, &apiErr) == nil && apiErr.Error.Message != "" {
		return &HTTPError{Status: status, Code: apiErr.Error.Code, Message: apiErr.Error.Message}
	}
	return &HTTPError{Status: status, Message: strings.TrimSpace(string(data))}
}

// IsNotFound reports whether err is fleetd's 404.
func IsNotFound(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Status == http.StatusNotFound
}

// ErrorText is a failure as one line: "CODE: message" when fleetd sent a
// code word, else the error; safe for a terminal (package termtext).
func ErrorText(err error) string {
	var he *HTTPError
	if errors.As(err, &he) && he.Code != "" {
		return termtext.Line(he.Code + ": " + he.Message)
	}
	return err.Error()
}
