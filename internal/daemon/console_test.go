package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// TestConsole_MountedAtUIBesideTheAPIWithTheHostCheck: /ui is served on
// fleetd's listener next to the REST API and gateway, with the same
// loopback Host check; the login code is for the primary's token only.
func TestConsole_MountedAtUIBesideTheAPIWithTheHostCheck(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		name, method, path, host, token string
		want                            int
		location                        string
	}{
		{"a login code for the primary", http.MethodPost, "/ui/codes", "", f.token, http.StatusOK, ""},
		{"no login code without a token", http.MethodPost, "/ui/codes", "", "", http.StatusUnauthorized, ""},
		{"no login code for a rebinding Host", http.MethodPost, "/ui/codes", "evil.example:8080", f.token, http.StatusForbidden, ""},
		{"the overview sends a stranger to log in", http.MethodGet, "/ui/", "", "", http.StatusSeeOther, "/ui/login"},
		{"the login page", http.MethodGet, "/ui/login", "", "", http.StatusOK, ""},
		{"no page for a rebinding Host", http.MethodGet, "/ui/login", "evil.example", "", http.StatusForbidden, ""},
		{"the API is still there", http.MethodGet, "/healthz", "", "", http.StatusOK, ""},
		{"and still wants its token", http.MethodGet, "/members", "", "", http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(f.ctx, tt.method, f.info.URL+tt.path, strings.NewReader(""))
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want || resp.Header.Get("Location") != tt.location {
				t.Errorf("%s %s: %s to %q, want %d to %q", tt.method, tt.path, resp.Status, resp.Header.Get("Location"), tt.want, tt.location)
			}
		})
	}
}

// warnings is a log handler that keeps the messages of warnings.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}

// TestConsole_OpenPageDoesNotHoldUpShutdown: a console page's event stream
// never goes idle; fleetd ends it when it stops, so the listener shuts down
// cleanly instead of waiting out its shutdown timeout and cutting
// connections.
func TestConsole_OpenPageDoesNotHoldUpShutdown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "profiles.yaml"), []byte(profileOnly), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	log := &warnings{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{ManifestsDir: dir, StateDir: state, Listen: "127.0.0.1:0", Sim: true, Logger: slog.New(log),
			Ready: func(i Info) { ready <- i }})
	}()
	var info Info
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	tok, err := os.ReadFile(statedir.At(state).PrimaryToken())
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	browser := &http.Client{Jar: jar, Transport: transport}
	req, _ := http.NewRequest(http.MethodPost, info.URL+"/ui/codes", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var code struct{ Path string }
	json.NewDecoder(resp.Body).Decode(&code)
	resp.Body.Close()
	page, err := browser.Get(info.URL + code.Path)
	if err != nil || page.StatusCode != http.StatusOK {
		t.Fatalf("login: %v %v", page, err)
	}
	page.Body.Close()
	stream, err := browser.Get(info.URL + "/ui/events")
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("open the event stream: %v %v", stream, err)
	}
	defer stream.Body.Close()
	first := make([]byte, 1)
	if _, err := stream.Body.Read(first); err != nil {
		t.Fatal(err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	io.Copy(io.Discard, stream.Body) // the stream has ended
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, m := range log.msgs {
		if m == "http shutdown" {
			t.Errorf("the listener's shutdown timed out (warnings: %q): the console's stream held it up", log.msgs)
		}
	}
}
