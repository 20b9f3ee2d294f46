package mcp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/store"
)

// fakeHold is a prune hold holding a list until confirmed.
type fakeHold struct{ held []store.PruneHold }

func (f *fakeHold) Held() []store.PruneHold { return f.held }

func (f *fakeHold) Confirm() []string {
	var names []string
	for _, h := range f.held {
		names = append(names, h.Member)
	}
	f.held = nil
	return names
}

// GET /prune shows the primary what the store holds, POST /prune/confirm
// prunes it and names what it pruned (nothing the second time); a worker
// may do neither.
func TestPrune_ThePrimaryListsAndConfirmsTheHold(t *testing.T) {
	since := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	hold := &fakeHold{held: []store.PruneHold{
		{Member: "a", Source: "/m/a.yaml", Since: since, Until: since.Add(2 * time.Minute), Message: "gone"},
		{Member: "b", Source: "/m/b.yaml", Since: since, Until: since.Add(2 * time.Minute), Message: "gone"},
	}}
	h, err := NewHandler(Options{Members: fakeMembers{}, Tokens: fakeTokens{"primary-secret": {Role: "primary"}, "worker-secret": {Role: "worker", Member: "a"}},
		Prune: hold})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	var list PruneHoldList
	getJSON(t, srv.URL+"/prune", "primary-secret", &list)
	if diff := cmp.Diff(PruneHoldList{APIVersion: "fleetd.dev/v1alpha1", Kind: "PruneHoldList", Items: hold.held}, list); diff != "" {
		t.Errorf("GET /prune (-want +got):\n%s", diff)
	}
	do := func(method, path, token string) (int, PruneConfirmed) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out PruneConfirmed
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, r := range []struct{ method, path string }{{"GET", "/prune"}, {"POST", "/prune/confirm"}} {
		if code, _ := do(r.method, r.path, "worker-secret"); code != http.StatusForbidden {
			t.Errorf("a worker's %s %s: %d, want 403", r.method, r.path, code)
		}
	}
	if code, got := do("POST", "/prune/confirm", "primary-secret"); code != http.StatusOK || !cmp.Equal(got.Pruned, []string{"a", "b"}) {
		t.Errorf("POST /prune/confirm = %d %v, want 200 [a b]", code, got.Pruned)
	}
	if code, got := do("POST", "/prune/confirm", "primary-secret"); code != http.StatusOK || got.Pruned == nil || len(got.Pruned) != 0 {
		t.Errorf("POST /prune/confirm again = %d %v, want 200 []", code, got.Pruned)
	}
}
