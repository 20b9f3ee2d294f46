package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/tokens"
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
		b, err := os.ReadFile(filepath.Join(f.stateDir, tokens.PrimaryFile))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("no primary token in %s: start `fleetd serve --state-dir %s` first, or set FLEETD_TOKEN", f.stateDir, f.stateDir)
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach fleetd at %s (is `fleetd serve` running?): %w", c.base, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read response from %s: %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		var apiErr struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(body, &apiErr) == nil && apiErr.Error.Message != "" {
			return &httpError{status: resp.StatusCode, code: apiErr.Error.Code, msg: apiErr.Error.Message}
		}
		return &httpError{status: resp.StatusCode, msg: strings.TrimSpace(string(body))}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode response from %s%s: %w", c.base, path, err)
	}
	return nil
}

type httpError struct {
	status    int
	code, msg string
}

func (e *httpError) Error() string {
	if e.code != "" {
		return fmt.Sprintf("%s (%s)", e.msg, e.code)
	}
	return fmt.Sprintf("HTTP %d: %s", e.status, e.msg)
}
