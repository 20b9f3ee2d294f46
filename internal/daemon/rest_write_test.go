package daemon

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/mcp"
)

// do sends a REST request and returns the status and body.
func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const reviewerYAML = `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer}
spec:
  profile: claude
`

func TestREST_MemberWrites(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "")
	w := f.spawn("coder")
	members := f.info.URL + "/members"
	file := filepath.Join(f.manifests, "reviewer.yaml")

	tests := []struct {
		name, method, url, token, body string
		wantStatus                     int
		wantBody                       string
	}{
		{"no token", "POST", members, "", reviewerYAML, 401, `"unauthorized"`},
		{"unknown token", "POST", members, "nope", reviewerYAML, 401, `"unauthorized"`},
		{"worker may not create", "POST", members, w.token, reviewerYAML, 403, `"forbidden"`},
		{"env is a boundary", "POST", members, f.token, reviewerYAML + "  env: {ANTHROPIC_BASE_URL: x}\n", 403, `"subscription_boundary"`},
		{"url is a boundary", "POST", members, f.token, `{"profile":"claude","name":"x","workspace":"https://evil.example"}`, 403, `"subscription_boundary"`},
		{"a duplicate key hiding a secret is a boundary", "POST", members, f.token, `{"profile":"claude","name":"x","workspace":"${OPENAI_API_KEY}","workspace":"api"}`, 403, `"subscription_boundary"`},
		{"a duplicate key is refused", "POST", members, f.token, `{"profile":"claude","name":"x","name":"y"}`, 422, `name: duplicate key`},
		{"a duplicate key in YAML is refused", "POST", members, f.token, reviewerYAML + "  profile: other\n", 422, `already set`},
		{"bad transport names its line and field", "POST", members, f.token, reviewerYAML + "  transport: http\n", 422, `request body:6: spec.transport: unknown value`},
		{"unknown field", "POST", members, f.token, reviewerYAML + "  colour: red\n", 422, `spec.colour`},
		{"unknown profile", "POST", members, f.token, strings.Replace(reviewerYAML, "claude", "nope", 1), 422, `spec.profile: no Profile named \"nope\"`},
		{"too large", "POST", members, f.token, reviewerYAML + "  prompt: " + strings.Repeat("x", 2<<20) + "\n", 413, `"too_large"`},
		{"create", "POST", members, f.token, reviewerYAML, 201, `"result": "created"`},
		{"unchanged", "POST", members, f.token, reviewerYAML, 200, `"result": "unchanged"`},
		{"configured", "POST", members, f.token, reviewerYAML + "  prompt: review\n", 200, `"result": "configured"`},
		{"spawn arguments as JSON", "POST", members, f.token, `{"profile":"claude","name":"helper"}`, 201, `"name": "helper"`},
		{"worker may not delete", "DELETE", members + "/reviewer", w.token, "", 403, `"forbidden"`},
		{"delete unknown", "DELETE", members + "/nobody", f.token, "", 404, `"not_found"`},
		{"delete", "DELETE", members + "/reviewer?wait=true", f.token, "", 200, `"result": "deleted"`},
		{"delete again", "DELETE", members + "/reviewer", f.token, "", 404, `"not_found"`},
		{"delete by pane id", "DELETE", members + "/" + w.pane, f.token, "", 200, `"name": "coder"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, tt.method, tt.url, tt.token, tt.body)
			if code != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Fatalf("%s %s = %d %s; want %d with %q", tt.method, tt.url, code, body, tt.wantStatus, tt.wantBody)
			}
			if tt.wantStatus >= 400 {
				var e mcp.APIError
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
					t.Errorf("error body %s is not {error:{code,message}}", body)
				}
			}
			if tt.name == "create" {
				if _, err := os.Stat(file); err != nil {
					t.Errorf("POST /members wrote no manifest: %v", err)
				}
			}
		})
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DELETE /members left the manifest: %v", err)
	}
}
