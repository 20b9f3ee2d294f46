package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// versionedObjects is a desired state in memory that keeps versions as
// the etcd store does: every write bumps a revision, a write with a stale
// metadata.resourceVersion is a conflict, a Profile or Tenant a Member
// references is not deleted, and CheckApply checks without writing.
type versionedObjects struct {
	rev     int64
	objects map[store.Key]v1alpha1.Object
	writes  int
}

func newVersionedObjects(objs ...v1alpha1.Object) *versionedObjects {
	s := &versionedObjects{objects: map[store.Key]v1alpha1.Object{}}
	for _, o := range objs {
		if err := s.Apply(context.Background(), o); err != nil {
			panic(err)
		}
	}
	s.writes = 0
	return s
}

// Get answers as the real stores do: a nil pointer of the kind for an
// object it does not hold.
func (s *versionedObjects) Get(kind, name string) (v1alpha1.Object, bool) {
	if o, ok := s.objects[store.Key{Kind: kind, Name: name}]; ok {
		return o, true
	}
	return map[string]v1alpha1.Object{v1alpha1.KindMember: (*v1alpha1.Member)(nil),
		v1alpha1.KindProfile: (*v1alpha1.Profile)(nil), v1alpha1.KindTenant: (*v1alpha1.Tenant)(nil)}[kind], false
}

func (s *versionedObjects) List(kind string) []v1alpha1.Object {
	var out []v1alpha1.Object
	for k, o := range s.objects {
		if k.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func (s *versionedObjects) CheckApply(_ context.Context, obj v1alpha1.Object) error {
	key := store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}
	want := obj.GetMeta().ResourceVersion
	cur, ok := s.objects[key]
	switch {
	case want == "":
	case !ok:
		return fmt.Errorf("apply %s: resourceVersion %s, but the object does not exist: %w", key, want, store.ErrConflict)
	case cur.GetMeta().ResourceVersion != want:
		return fmt.Errorf("apply %s: resourceVersion %s, but it is at %s: %w", key, want, cur.GetMeta().ResourceVersion, store.ErrConflict)
	}
	return nil
}

func (s *versionedObjects) Apply(ctx context.Context, obj v1alpha1.Object) error {
	if err := s.CheckApply(ctx, obj); err != nil {
		return err
	}
	s.rev++
	s.writes++
	c := obj.(interface{ DeepCopyObject() v1alpha1.Object }).DeepCopyObject()
	c.GetMeta().ResourceVersion = strconv.FormatInt(s.rev, 10)
	s.objects[store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}] = c
	return nil
}

func (s *versionedObjects) Delete(_ context.Context, kind, name string) error {
	key := store.Key{Kind: kind, Name: name}
	if _, ok := s.objects[key]; !ok {
		return fmt.Errorf("delete %s: %w", key, store.ErrNotFound)
	}
	var members []*v1alpha1.Member
	for _, o := range s.List(v1alpha1.KindMember) {
		members = append(members, o.(*v1alpha1.Member))
	}
	if err := store.InUse(key, members); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	s.writes++
	delete(s.objects, key)
	return nil
}

func operatorProfile(name string, env map[string]string) *v1alpha1.Profile {
	p := &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: name}, Spec: v1alpha1.ProfileSpec{Harness: "claude", Env: env}}
	p.SetDefaults()
	return p
}

// restCall makes one request with a bearer token and returns the status
// and the body.
func restCall(t *testing.T, h http.Handler, method, path, token, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestREST_ProfileAndTenantWrites: the primary creates, updates, dry-runs
// and deletes Profiles and Tenants over REST with the answers kubectl
// users expect; a worker is forbidden every write.
func TestREST_ProfileAndTenantWrites(t *testing.T) {
	member := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "reviewer"}, Spec: v1alpha1.MemberSpec{Profile: "claude"}}
	member.SetDefaults()
	st := newVersionedObjects(operatorProfile("claude", map[string]string{"ANTHROPIC_BASE_URL": "https://proxy.corp"}), member)
	h, err := NewHandler(Options{Members: fakeMembers{}, Store: st, Tokens: fakeTokens{"p": {Role: "primary"}, "w": {Role: "worker", Member: "reviewer"}}})
	if err != nil {
		t.Fatal(err)
	}
	const (
		codex      = "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: codex}\nspec: {harness: codex}\n"
		codexArgs  = `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Profile","metadata":{"name":"codex"},"spec":{"harness":"codex","args":["-m","gpt-5.4"]}}`
		acme       = "apiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: acme}\nspec: {url: https://acme.example/mcp, credentialEnv: ACME_FLEETD_TOKEN}\n"
		claude     = "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec:\n  harness: claude\n  env: {ANTHROPIC_BASE_URL: https://proxy.corp}\n"
		claudeMore = "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec:\n  harness: claude\n  args: [--model, opus]\n  env: {ANTHROPIC_BASE_URL: https://proxy.corp}\n"
	)
	for _, step := range []struct {
		name, method, path, token, body string
		wantStatus                      int
		wantCode, wantResult, wantIn    string
		wantWrites                      int
	}{
		{"a worker may not create a profile", "POST", "/profiles", "w", codex, 403, "forbidden", "", "only the primary", 0},
		{"a worker may not delete a profile", "DELETE", "/profiles/claude", "w", "", 403, "forbidden", "", "", 0},
		{"a dry run of a new profile writes nothing", "POST", "/profiles?dryRun=All", "p", codex, 201, "", "created", "", 0},
		{"a new profile", "POST", "/profiles", "p", codex, 201, "", "created", "", 1},
		{"the same profile again", "POST", "/profiles", "p", codex, 200, "", "unchanged", "", 1},
		{"a changed profile, as JSON", "POST", "/profiles", "p", codexArgs, 200, "", "configured", "", 2},
		{"PUT updates the profile the path names", "PUT", "/profiles/codex", "p", codex, 200, "", "configured", "", 3},
		{"PUT of another name than the path's", "PUT", "/profiles/claude", "p", codex, 400, "invalid_argument", "", "the path names", 3},
		{"PUT of a profile that does not exist", "PUT", "/profiles/gemini", "p", strings.ReplaceAll(codex, "codex", "gemini"), 404, "not_found", "", "POST /profiles creates it", 3},
		{"a Tenant to the profiles' path", "POST", "/profiles", "p", acme, 422, "invalid_spec", "", "kind: want Profile, got Tenant", 3},
		{"an invalid profile", "POST", "/profiles", "p", "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: x}\nspec: {harness: claude, restartPolicy: Sometimes}\n", 422, "invalid_spec", "", "spec.restartPolicy", 3},
		{"a new tenant", "POST", "/tenants", "p", acme, 201, "", "created", "", 4},
		{"a tenant given a provider's credential", "PUT", "/tenants/acme", "p", strings.Replace(acme, "ACME_FLEETD_TOKEN", "ANTHROPIC_API_KEY", 1), 403, "subscription_boundary", "", "spec.credentialEnv", 4},
		{"a tenant's gateway moved: its credential would follow", "PUT", "/tenants/acme", "p", strings.Replace(acme, "acme.example", "evil.example", 1), 403, "subscription_boundary", "", "spec.url", 4},
		{"a new tenant naming acme's credential", "POST", "/tenants", "p", strings.Replace(strings.Replace(acme, "acme.example", "evil.example", 1), "{name: acme}", "{name: evil}", 1), 403, "subscription_boundary", "", "credential goes to its own gateway only", 4},
		{"the operator's endpoint kept, another field changed", "POST", "/profiles", "p", claudeMore, 200, "", "configured", "", 5},
		{"the operator's endpoint changed", "POST", "/profiles", "p", strings.Replace(claude, "proxy.corp", "elsewhere.example", 1), 403, "subscription_boundary", "", "spec.env.ANTHROPIC_BASE_URL", 5},
		{"a profile a member references is not deleted", "DELETE", "/profiles/claude", "p", "", 409, "conflict", "", "member/reviewer (spec.profile)", 5},
		{"a profile nothing references is deleted", "DELETE", "/profiles/codex", "p", "", 200, "", "deleted", "", 6},
		{"a profile that is not there", "DELETE", "/profiles/codex", "p", "", 404, "not_found", "", "", 6},
		{"a tenant is deleted", "DELETE", "/tenants/acme", "p", "", 200, "", "deleted", "", 7},
	} {
		code, body := restCall(t, h, step.method, step.path, step.token, step.body)
		var res ObjectResult
		var apiErr APIError
		json.Unmarshal([]byte(body), &res)
		json.Unmarshal([]byte(body), &apiErr)
		if code != step.wantStatus || apiErr.Error.Code != step.wantCode || res.Result != step.wantResult || !strings.Contains(body, step.wantIn) {
			t.Errorf("%s: %s %s = %d %s; want %d, code %q, result %q, containing %q", step.name, step.method, step.path, code, body,
				step.wantStatus, step.wantCode, step.wantResult, step.wantIn)
		}
		if st.writes != step.wantWrites {
			t.Fatalf("%s: %d writes so far, want %d", step.name, st.writes, step.wantWrites)
		}
	}
	if _, ok := st.Get(v1alpha1.KindProfile, "claude"); !ok {
		t.Error("the referenced profile is gone")
	}
	p, _ := st.Get(v1alpha1.KindProfile, "claude")
	if diff := cmp.Diff([]string{"--model", "opus"}, p.(*v1alpha1.Profile).Spec.Args); diff != "" {
		t.Errorf("claude's args (-want +got):\n%s", diff)
	}
}

// A Profile or Tenant written with the resourceVersion it was read at is
// written only over that version: a stale one is 409, for a dry run too.
func TestREST_ProfileWriteOverAStaleResourceVersionIsAConflict(t *testing.T) {
	st := newVersionedObjects(operatorProfile("claude", nil))
	h, err := NewHandler(Options{Members: fakeMembers{}, Store: st, Tokens: fakeTokens{"p": {Role: "primary"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, read := restCall(t, h, "GET", "/profiles/claude", "p", "")
	var p v1alpha1.Profile
	if err := json.Unmarshal([]byte(read), &p); err != nil || p.ResourceVersion == "" {
		t.Fatalf("GET /profiles/claude = %s (%v), want it with a resourceVersion", read, err)
	}
	p.Spec.Args = []string{"--model", "opus"}
	body, _ := json.Marshal(p)
	if code, resp := restCall(t, h, "PUT", "/profiles/claude", "p", string(body)); code != 200 {
		t.Fatalf("PUT at the current version = %d %s", code, resp)
	}
	p.Spec.Args = []string{"--model", "haiku"} // written over the version read before the PUT
	body, _ = json.Marshal(p)
	for _, path := range []string{"/profiles/claude?dryRun=All", "/profiles/claude"} {
		if code, resp := restCall(t, h, "PUT", path, "p", string(body)); code != http.StatusConflict || !strings.Contains(resp, `"conflict"`) {
			t.Errorf("PUT %s over a stale resourceVersion = %d %s, want 409 conflict", path, code, resp)
		}
	}
	if got, _ := st.Get(v1alpha1.KindProfile, "claude"); got.(*v1alpha1.Profile).Spec.Args[1] != "opus" {
		t.Errorf("the stale write changed the profile: %v", got.(*v1alpha1.Profile).Spec.Args)
	}
}
