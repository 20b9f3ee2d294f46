package daemon

import (
	"net/http"
	"strings"
	"testing"
)

// TestConsole_MountedAtUIBesideTheAPIWithTheHostCheck: /ui is served on
// fleetd's listener next to the REST API and gateway, with the same
// loopback Host check; the login code is for the primary's token only.
func TestConsole_MountedAtUIBesideTheAPIWithTheHostCheck(t *testing.T) {
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
