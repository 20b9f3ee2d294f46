package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// catalogStore is a desired state holding two Profiles and a Tenant.
type catalogStore struct{ racedStore }

func (catalogStore) objects() []v1alpha1.Object {
	return []v1alpha1.Object{
		&v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "codex"}, Spec: v1alpha1.ProfileSpec{Harness: "codex", Env: map[string]string{"K": "v"}}},
		&v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "claude"}, Spec: v1alpha1.ProfileSpec{Harness: "claude"}},
		&v1alpha1.Tenant{ObjectMeta: v1alpha1.ObjectMeta{Name: "acme"}, Spec: v1alpha1.TenantSpec{URL: "https://acme.example/mcp", CredentialEnv: "ACME_TOKEN"}},
	}
}

func (s catalogStore) Get(kind, name string) (v1alpha1.Object, bool) {
	for _, o := range s.objects() {
		if o.GetObjectKind() == kind && o.GetName() == name {
			return o, true
		}
	}
	return nil, false
}

func (s catalogStore) List(kind string) []v1alpha1.Object {
	var out []v1alpha1.Object
	for _, o := range s.objects() {
		if o.GetObjectKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func TestREST_ProfilesAndTenantsAreThePrimarys(t *testing.T) {
	fleet := newLiveFleet()
	h, err := NewHandler(Options{Members: fleet, Store: catalogStore{}, Tokens: fakeTokens{"p": {Role: "primary"}, "w": {Role: "worker", Member: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, token string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	code, body := get("/profiles", "p")
	var profiles struct {
		Kind  string
		Items []v1alpha1.Profile
	}
	if err := json.Unmarshal([]byte(body), &profiles); code != 200 || err != nil {
		t.Fatalf("GET /profiles: %d %v\n%s", code, err, body)
	}
	var names []string
	for _, p := range profiles.Items {
		names = append(names, p.Kind+"/"+p.Name)
	}
	if diff := cmp.Diff([]string{"Profile/claude", "Profile/codex"}, names); diff != "" || profiles.Kind != "ProfileList" {
		t.Errorf("GET /profiles kind %s, items (-want +got):\n%s", profiles.Kind, diff)
	}
	for _, tt := range []struct {
		path, token string
		wantCode    int
		wantBody    string
	}{
		{"/profiles/codex", "p", 200, `"harness": "codex"`},
		{"/profiles/nope", "p", 404, `Profile \"nope\" not found`},
		{"/tenants", "p", 200, `"credentialEnv": "ACME_TOKEN"`},
		{"/tenants/acme", "p", 200, `"kind": "Tenant"`},
		{"/tenants/globex", "p", 404, "not_found"},
		{"/profiles", "w", 403, "only the primary"},
		{"/tenants/acme", "w", 403, "only the primary"},
		{"/profiles", "nobody", 401, ""},
	} {
		code, body := get(tt.path, tt.token)
		if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
			t.Errorf("GET %s as %s: %d %s, want %d with %q", tt.path, tt.token, code, body, tt.wantCode, tt.wantBody)
		}
	}
}

func TestREST_MemberReferences(t *testing.T) {
	a := member("a", "Ready")
	a.Status.PaneID, a.Status.TerminalID, a.Status.SessionID = "w1:p2", "term_9", "0d8f-11"
	fleet := newLiveFleet(a, member("b", "Pending"))
	srv, _ := newWatchServer(t, fleet, Options{})
	for ref, want := range map[string]int{"a": 200, "w1:p2": 200, "term_9": 200, "0d8f-11": 200, "b": 200, "nope": 404} {
		for _, suffix := range []string{"", "/events"} {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/members/"+ref+suffix, nil)
			req.Header.Set("Authorization", "Bearer primary-secret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var m v1alpha1.Member
			if suffix == "" && resp.StatusCode == 200 {
				if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || (ref != "b" && m.Name != "a") {
					t.Errorf("GET /members/%s: %v, name %q, want a", ref, err, m.Name)
				}
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET /members/%s%s: %d, want %d", ref, suffix, resp.StatusCode, want)
			}
		}
	}
}
