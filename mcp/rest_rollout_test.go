package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/rollout"
)

// fakeRollouts are the profiles' rollouts as a test sets them.
type fakeRollouts struct {
	revs      rollout.Store
	restarted []string
	pending   map[string]bool // RestartPending
}

func (f *fakeRollouts) Profile(name string) (v1alpha1.Profile, bool) {
	if name != "codex" {
		return v1alpha1.Profile{}, false
	}
	return v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: name}, Status: v1alpha1.ProfileStatus{
		Conditions: []v1alpha1.Condition{{Type: v1alpha1.ConditionProgressing, Status: v1alpha1.ConditionFalse, Reason: v1alpha1.ReasonRolloutComplete}},
	}}, true
}
func (f *fakeRollouts) ProfileEvents(string) []v1alpha1.Event { return nil }
func (f *fakeRollouts) Restart(member string, now bool) error {
	f.restarted = append(f.restarted, member)
	return nil
}
func (f *fakeRollouts) RestartPending(member string) bool { return f.pending[member] }
func (f *fakeRollouts) Revisions() rollout.Store          { return f.revs }

// Rollouts are the operator's: a worker's token reads and changes none of
// them (403), whatever the verb; the primary's reaches them, and a pause or
// resume of a member, or a revision that is no number, is a bad request,
// and a member another node runs is restarted by that node.
func TestREST_RolloutsAreThePrimarys(t *testing.T) {
	revs, _ := rollout.OpenDir(nil, nil)
	ro := &fakeRollouts{revs: revs}
	fleet := newLiveFleet(v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "a"}},
		v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "far"}, Status: v1alpha1.MemberStatus{NodeName: "n2"}})
	h, err := NewHandler(Options{Members: fleet, Node: "n1", Store: catalogStore{}, Rollouts: ro,
		Tokens: fakeTokens{"p": {Role: "primary"}, "w": {Role: "worker", Member: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, token string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	for _, r := range []struct{ method, path string }{
		{"GET", "/rollouts/profiles/codex"}, {"GET", "/rollouts/profiles/codex/revisions/1"},
		{"POST", "/rollouts/profiles/codex/undo"}, {"POST", "/rollouts/members/a/restart"},
		{"POST", "/rollouts/profiles/codex/pause"}, {"POST", "/rollouts/profiles/codex/resume"},
	} {
		if code, body := do(r.method, r.path, "w"); code != http.StatusForbidden || !strings.Contains(body, "only the primary") {
			t.Errorf("%s %s with a worker's token: %d %s; want 403", r.method, r.path, code, body)
		}
	}
	if len(ro.restarted) != 0 {
		t.Errorf("a worker restarted %v", ro.restarted)
	}
	for _, tt := range []struct {
		method, path string
		code         int
		says         string
	}{
		{"GET", "/rollouts/profiles/codex", 200, `"state": "complete"`},
		{"GET", "/rollouts/profiles/nope", 404, `profile \"nope\" not found`},
		{"GET", "/rollouts/tenants/acme", 404, `no rollouts of \"tenants\"`},
		{"GET", "/rollouts/profiles/codex/revisions/x", 400, "want a revision number"},
		{"GET", "/rollouts/profiles/codex/revisions/1", 404, "profile/codex has no revisions recorded yet"},
		{"POST", "/rollouts/members/a/pause", 400, "rollout pause is for profiles"},
		{"POST", "/rollouts/members/far/restart", 409, "runs on node n2"},
		{"POST", "/rollouts/members/a/restart", 200, `"result": "restarted"`},
	} {
		if code, body := do(tt.method, tt.path, "p"); code != tt.code || !strings.Contains(body, tt.says) {
			t.Errorf("%s %s: %d %s; want %d saying %q", tt.method, tt.path, code, body, tt.code, tt.says)
		}
	}
	if len(ro.restarted) != 1 || ro.restarted[0] != "a" {
		t.Errorf("the primary's restarts reached %v; want [a] (far runs on another node)", ro.restarted)
	}
}

// A member whose restart was asked, and whose status still shows the agent
// it replaces, is not rolled out: its rollout progresses until the status
// shows the restart.
func TestREST_APendingRestartIsNoCompleteRollout(t *testing.T) {
	revs, _ := rollout.OpenDir(nil, nil)
	ro := &fakeRollouts{revs: revs, pending: map[string]bool{}}
	ready := v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, Conditions: []v1alpha1.Condition{
		{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue, Reason: "AgentReady"},
		{Type: v1alpha1.ConditionUpToDate, Status: v1alpha1.ConditionTrue, Reason: v1alpha1.ReasonAsExpected}}}
	fleet := newLiveFleet(v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "a"}, Status: ready})
	h, err := NewHandler(Options{Members: fleet, Node: "n1", Store: catalogStore{}, Rollouts: ro, Tokens: fakeTokens{"p": {Role: "primary"}}})
	if err != nil {
		t.Fatal(err)
	}
	status := func() string {
		req := httptest.NewRequest("GET", "/rollouts/members/a", nil)
		req.Header.Set("Authorization", "Bearer p")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Body.String()
	}
	if got := status(); !strings.Contains(got, `"state": "complete"`) {
		t.Fatalf("a Ready member with nothing asked: %s; want complete", got)
	}
	ro.pending["a"] = true
	if got := status(); !strings.Contains(got, `"state": "progressing"`) || !strings.Contains(got, "its restart was asked") {
		t.Errorf("a Ready member whose restart was asked: %s; want progressing, saying so", got)
	}
}
