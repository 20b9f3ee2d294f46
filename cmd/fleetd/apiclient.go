package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// defaultServer is where `fleetd serve` listens unless told otherwise.
const defaultServer = "http://127.0.0.1:8080"

// clientFlags are the flags of every command that talks to a running
// fleetd over its REST API.
type clientFlags struct {
	server   string
	stateDir string
}

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", envOr("FLEETD_SERVER", defaultServer), "base URL of the running fleetd (env FLEETD_SERVER)")
	cmd.Flags().StringVar(&f.stateDir, "state-dir", fleetdStateDir(), "fleetd's state directory, where primary.token is read from")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// apiClient calls a running fleetd's REST API as the primary (or as the
// holder of $FLEETD_TOKEN when that is set, e.g. inside a worker pane).
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func (f *clientFlags) client() (*apiClient, error) {
	token := os.Getenv("FLEETD_TOKEN")
	if token == "" {
		b, err := os.ReadFile(statedir.At(f.stateDir).PrimaryToken())
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("no primary token in %s: start `fleetd serve --state-dir %s` first, or set FLEETD_TOKEN "+
					"(in a fleet on etcd, copy the primary.token of the node that minted the fleet's token here, mode 0600; this node's fleetd log names that node)", f.stateDir, f.stateDir)
			}
			return nil, fmt.Errorf("read primary token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return &apiClient{base: strings.TrimRight(f.server, "/"), token: token, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// get fetches path and decodes the JSON body into out. A non-2xx answer
// becomes an error carrying the server's message.
func (c *apiClient) get(ctx context.Context, path string, out any) error {
	_, err := c.do(ctx, http.MethodGet, path, nil, out)
	return err
}

// post sends body as JSON to path and decodes the JSON answer into out; it
// returns the HTTP status of a 2xx answer.
func (c *apiClient) post(ctx context.Context, path string, body any, out any) (int, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, fmt.Errorf("encode request to %s: %w", path, err)
	}
	return c.do(ctx, http.MethodPost, path, data, out)
}

// delete sends DELETE to path and decodes the JSON answer into out.
func (c *apiClient) delete(ctx context.Context, path string, out any) error {
	_, err := c.do(ctx, http.MethodDelete, path, nil, out)
	return err
}

// do makes one authenticated request (with a JSON body when body is not
// nil) and decodes a 2xx JSON answer into out. A non-2xx answer becomes an
// *httpError carrying the server's code word and message.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach fleetd at %s (is `fleetd serve` running?): %w", c.base, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("read response from %s: %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		return 0, responseError(resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return 0, fmt.Errorf("decode response from %s%s: %w", c.base, path, err)
	}
	return resp.StatusCode, nil
}

// responseError is the *httpError of a non-2xx answer with body data.
func responseError(status int, data []byte) error {
	var apiErr struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(data, &apiErr) == nil && apiErr.Error.Message != "" {
		return &httpError{status: status, code: apiErr.Error.Code, msg: apiErr.Error.Message}
	}
	return &httpError{status: status, msg: strings.TrimSpace(string(data))}
}

type httpError struct {
	status    int
	code, msg string
}

// Error is the server's message, safe for a terminal on one line (package
// termtext): it may quote a name or a value someone else wrote.
func (e *httpError) Error() string {
	if e.code != "" {
		return termtext.Line(fmt.Sprintf("%s (%s)", e.msg, e.code))
	}
	return termtext.Line(fmt.Sprintf("HTTP %d: %s", e.status, e.msg))
}
