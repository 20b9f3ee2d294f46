package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// racedStore is a desired state whose writes succeed and whose member is
// deleted by someone else right after each write: the members source and
// the waiter decide what the writer then sees.
type racedStore struct{}

func (racedStore) Get(kind, name string) (v1alpha1.Object, bool) {
	if kind == v1alpha1.KindProfile {
		return &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: name}}, true
	}
	return nil, false
}
func (racedStore) List(string) []v1alpha1.Object                { return nil }
func (racedStore) Apply(context.Context, v1alpha1.Object) error { return nil }
func (racedStore) Delete(context.Context, string, string) error { return store.ErrNotFound }

// deletedWhileWaiting is a waiter that sees the member gone.
type deletedWhileWaiting struct{}

func (deletedWhileWaiting) WaitFor(_ context.Context, cond func([]v1alpha1.Member) bool) error {
	cond(nil) // the member is gone from the fleet
	return nil
}

// TestREST_CreateThatLosesToADeleteIsAConflict: a create whose member is
// deleted before it can be shown (or while it waits for Ready) lost a race
// with another request: 409 conflict, not an internal error.
func TestREST_CreateThatLosesToADeleteIsAConflict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members fakeMembers
		query   string
	}{
		{"deleted right after the write", fakeMembers{}, ""},
		{"deleted while waiting for Ready", fakeMembers{"racer": {ObjectMeta: v1alpha1.ObjectMeta{Name: "racer", Generation: 1}}}, "?wait=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NewHandler(Options{Members: tc.members, Tokens: fakeTokens{"primary-secret": {Role: "primary"}},
				Store: racedStore{}, Waiter: deletedWhileWaiting{}})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("POST", "/members"+tc.query, strings.NewReader(`{"profile":"claude","name":"racer"}`))
			req.Header.Set("Authorization", "Bearer primary-secret")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var body APIError
			json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusConflict || body.Error.Code != "conflict" || !strings.Contains(body.Error.Message, "deleted") {
				t.Fatalf("POST /members%s = %d %s, want 409 conflict", tc.query, rec.Code, rec.Body)
			}
		})
	}
}

// recordingStore knows one Profile, claude, and counts the writes.
type recordingStore struct{ applied *int }

func (s recordingStore) Get(kind, name string) (v1alpha1.Object, bool) {
	if kind == v1alpha1.KindProfile && name == "claude" {
		return &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: name}}, true
	}
	return nil, false
}
func (recordingStore) List(string) []v1alpha1.Object { return nil }
func (s recordingStore) Apply(context.Context, v1alpha1.Object) error {
	*s.applied++
	return nil
}
func (recordingStore) Delete(context.Context, string, string) error { return store.ErrNotFound }

// TestREST_DryRunChecksAndWritesNothing: POST /members?dryRun=All answers
// as the write would — the result, or the same refusal — and never writes.
func TestREST_DryRunChecksAndWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, query, body string
		wantStatus        int
		wantInBody        string
		wantWrites        int
	}{
		{"a new member would be created", "?dryRun=All", `{"profile":"claude","name":"dry"}`, http.StatusCreated, `"result": "created"`, 0},
		{"a missing profile is refused as by a write", "?dryRun=All", `{"profile":"nope","name":"dry"}`, http.StatusUnprocessableEntity, `no Profile named \"nope\"`, 0},
		{"an invalid spec is refused", "?dryRun=All", `{"profile":"claude","name":"dry","transport":"http"}`, http.StatusUnprocessableEntity, "spec.transport", 0},
		{"an unknown dryRun value is a bad request", "?dryRun=server", `{"profile":"claude","name":"dry"}`, http.StatusBadRequest, "dryRun", 0},
		{"without dryRun the member is written", "", `{"profile":"claude","name":"dry"}`, http.StatusCreated, `"result": "created"`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writes := 0
			members := fakeMembers{}
			if tc.wantWrites > 0 {
				members = fakeMembers{"dry": {ObjectMeta: v1alpha1.ObjectMeta{Name: "dry"}}}
			}
			h, err := NewHandler(Options{Members: members, Tokens: fakeTokens{"primary-secret": {Role: "primary"}},
				Store: recordingStore{applied: &writes}})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("POST", "/members"+tc.query, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer primary-secret")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus || !strings.Contains(rec.Body.String(), tc.wantInBody) {
				t.Errorf("POST /members%s = %d %s, want %d with %s", tc.query, rec.Code, rec.Body, tc.wantStatus, tc.wantInBody)
			}
			if writes != tc.wantWrites {
				t.Errorf("%d writes, want %d", writes, tc.wantWrites)
			}
		})
	}
}

// versionedStore holds one member at resourceVersion "5" and, like the etcd
// store, refuses a write that names another version.
type versionedStore struct {
	racedStore
	gotVersion *string
}

func (s versionedStore) Get(kind, name string) (v1alpha1.Object, bool) {
	if kind == v1alpha1.KindMember {
		return &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name, ResourceVersion: "5"}, Spec: v1alpha1.MemberSpec{Profile: "old"}}, true
	}
	return s.racedStore.Get(kind, name)
}

func (s versionedStore) Apply(_ context.Context, obj v1alpha1.Object) error {
	*s.gotVersion = obj.GetMeta().ResourceVersion
	if v := obj.GetMeta().ResourceVersion; v != "" && v != "5" {
		return fmt.Errorf("apply Member/%s: %w", obj.GetName(), store.ErrConflict)
	}
	return nil
}

// TestREST_StaleResourceVersionIsAConflict: a Member whose
// metadata.resourceVersion is not the stored one (someone changed it since
// it was read) is refused with 409 conflict, like kubectl against a
// Kubernetes API server; the version reaches the store as written.
func TestREST_StaleResourceVersionIsAConflict(t *testing.T) {
	var got string
	h, err := NewHandler(Options{Members: fakeMembers{"racer": {ObjectMeta: v1alpha1.ObjectMeta{Name: "racer"}}},
		Tokens: fakeTokens{"primary-secret": {Role: "primary"}}, Store: versionedStore{gotVersion: &got}})
	if err != nil {
		t.Fatal(err)
	}
	body := "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: racer, resourceVersion: \"4\"}\nspec: {profile: claude}\n"
	req := httptest.NewRequest("POST", "/members", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer primary-secret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var resp APIError
	json.Unmarshal(rec.Body.Bytes(), &resp)
	if rec.Code != http.StatusConflict || resp.Error.Code != "conflict" || !strings.Contains(resp.Error.Message, "stale") {
		t.Fatalf("POST /members with a stale resourceVersion = %d %s, want 409 conflict", rec.Code, rec.Body)
	}
	if got != "4" {
		t.Errorf("the store got resourceVersion %q, want the body's \"4\"", got)
	}
}

// worktreeStore knows a Profile whose members get worktrees of /srv/api
// (branches agents/NAME) and one member, holder, on branch agents/holder.
type worktreeStore struct{ recordingStore }

func (s worktreeStore) Get(kind, name string) (v1alpha1.Object, bool) {
	if kind == v1alpha1.KindProfile && name == "agents" {
		return &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: name},
			Spec: v1alpha1.ProfileSpec{Harness: "codex", Worktree: &v1alpha1.ProfileWorktree{Repo: "/srv/api", BranchPrefix: "agents"}}}, true
	}
	return s.recordingStore.Get(kind, name)
}

func (worktreeStore) List(kind string) []v1alpha1.Object {
	if kind != v1alpha1.KindMember {
		return nil
	}
	return []v1alpha1.Object{&v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "holder"}, Spec: v1alpha1.MemberSpec{Profile: "agents"}}}
}

// TestREST_WorktreeBranchOfAnotherMemberIsRefused: a member whose worktree
// branch another member claims is refused before it is written, naming the
// other; a branch of its own is written.
func TestREST_WorktreeBranchOfAnotherMemberIsRefused(t *testing.T) {
	member := func(name, worktree string) string {
		return `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"` + name + `"},"spec":{"profile":"claude"` + worktree + `}}`
	}
	for _, tc := range []struct {
		name, body string
		wantStatus int
		wantInBody string
		wantWrites int
	}{
		{"the branch the profile gives another member", member("mine", `,"worktree":{"repo":"/srv/api/","branch":"agents/holder"}`),
			http.StatusUnprocessableEntity, `spec.worktree.branch: branch \"agents/holder\" of repository /srv/api is claimed by member \"holder\" too`, 0},
		{"a branch of its own", member("mine", `,"worktree":{"repo":"/srv/api","branch":"agents/mine"}`), http.StatusCreated, `"result": "created"`, 1},
		{"spawned from the profile: its own branch", `{"profile":"agents","name":"fresh"}`, http.StatusCreated, `"result": "created"`, 1},
		{"the claiming member itself, written again", `{"profile":"agents","name":"holder"}`, http.StatusCreated, `"result"`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writes := 0
			h, err := NewHandler(Options{Members: fakeMembers{"mine": {}, "fresh": {}, "holder": {}}, Tokens: fakeTokens{"primary-secret": {Role: "primary"}},
				Store: worktreeStore{recordingStore{applied: &writes}}})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("POST", "/members", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer primary-secret")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus || !strings.Contains(rec.Body.String(), tc.wantInBody) || writes != tc.wantWrites {
				t.Errorf("POST /members = %d %s (%d writes), want %d with %s (%d writes)", rec.Code, rec.Body, writes, tc.wantStatus, tc.wantInBody, tc.wantWrites)
			}
		})
	}
}
