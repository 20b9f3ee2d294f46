package mcp

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

type fakeMembers map[string]v1alpha1.Member

func (f fakeMembers) Members() []v1alpha1.Member {
	out := []v1alpha1.Member{f["a"], f["b"]}
	return out
}

func (f fakeMembers) Member(name string) (v1alpha1.Member, bool) {
	m, ok := f[name]
	return m, ok
}

func (f fakeMembers) MemberEvents(name string) []v1alpha1.Event {
	return []v1alpha1.Event{{Type: v1alpha1.EventNormal, Reason: "Started", Message: name + " started"}}
}

type fakeTokens map[string]tokens.Identity

func (f fakeTokens) Resolve(token string) (tokens.Identity, bool) {
	id, ok := f[token]
	return id, ok
}

func newTestHandler() http.Handler {
	members := fakeMembers{
		"a": {ObjectMeta: v1alpha1.ObjectMeta{Name: "a"}, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady}},
		"b": {ObjectMeta: v1alpha1.ObjectMeta{Name: "b"}, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhasePending}},
	}
	toks := fakeTokens{"primary-secret": {Role: "primary"}, "worker-secret": {Role: "worker", Member: "a"}}
	h, err := NewHandler(Options{Members: members, Tokens: toks, Loopback: true,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "# metrics\n") })})
	if err != nil {
		panic(err)
	}
	return h
}

func TestREST_AuthAndRoutes(t *testing.T) {
	h := newTestHandler()
	tests := []struct {
		name, method, path, host, auth string
		wantStatus                     int
		wantBody                       string // substring
	}{
		{"healthz open", "GET", "/healthz", "127.0.0.1:8080", "", 200, "ok"},
		{"readyz open", "GET", "/readyz", "localhost:8080", "", 200, "ok"},
		{"metrics open", "GET", "/metrics", "[::1]:8080", "", 200, "# metrics"},
		{"members without token", "GET", "/members", "127.0.0.1:8080", "", 401, `"unauthorized"`},
		{"members with unknown token", "GET", "/members", "127.0.0.1:8080", "Bearer nope", 401, `"unauthorized"`},
		{"members with basic auth", "GET", "/members", "127.0.0.1:8080", "Basic cHJpbWFyeS1zZWNyZXQ=", 401, `"unauthorized"`},
		{"members as primary", "GET", "/members", "127.0.0.1:8080", "Bearer primary-secret", 200, `"kind": "MemberList"`},
		{"members as worker", "GET", "/members", "127.0.0.1:8080", "bearer worker-secret", 200, `"name": "b"`},
		{"one member", "GET", "/members/a", "127.0.0.1:8080", "Bearer primary-secret", 200, `"phase": "Ready"`},
		{"unknown member", "GET", "/members/zz", "127.0.0.1:8080", "Bearer primary-secret", 404, `"not_found"`},
		{"events", "GET", "/members/a/events", "127.0.0.1:8080", "Bearer primary-secret", 200, `"a started"`},
		{"rebinding host refused", "GET", "/healthz", "evil.example:8080", "", 403, "not a loopback name"},
		{"wrong method", "POST", "/healthz", "127.0.0.1:8080", "", 405, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.Host = tt.host
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("body %q does not contain %q", rec.Body, tt.wantBody)
			}
			if strings.Contains(rec.Body.String(), "secret") {
				t.Errorf("body leaks a token: %s", rec.Body)
			}
		})
	}
}

func TestREST_MemberListShape(t *testing.T) {
	h := newTestHandler()
	req := httptest.NewRequest("GET", "/members", nil)
	req.Host = "127.0.0.1:8080"
	req.Header.Set("Authorization", "Bearer primary-secret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var list MemberList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range list.Items {
		got = append(got, m.APIVersion+"/"+m.Kind+"/"+m.Name+"/"+m.Status.Phase)
	}
	want := []string{"fleetd.dev/v1alpha1/Member/a/Ready", "fleetd.dev/v1alpha1/Member/b/Pending"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc":   "abc",
		"bearer  abc ": "abc",
		"Bearer ":      "",
		"Basic abc":    "",
		"":             "",
		"Bearerabc":    "",
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", header)
		got, ok := BearerToken(req)
		if got != want || ok != (want != "") {
			t.Errorf("BearerToken(%q) = %q, %v; want %q", header, got, ok, want)
		}
	}
}
