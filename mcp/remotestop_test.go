package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// deletingStore deletes any member.
type deletingStore struct{ racedStore }

func (deletingStore) Delete(context.Context, string, string) error { return nil }

// nodeReports is a fleet view's waiter: WaitStopped returns once reported
// is closed, or fails with its context.
type nodeReports struct {
	deletedWhileWaiting
	reported chan struct{}
	asked    chan v1alpha1.Member
}

func (r nodeReports) WaitStopped(ctx context.Context, m v1alpha1.Member) error {
	r.asked <- m
	select {
	case <-r.reported:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A stop with wait of a member another node runs waits for that node's
// report, not for a pane here (whose id may be any node's): it answers once
// the report comes; when it does not come in time, it answers that the
// member is still terminating if its agent was busy (its node closes the
// tab once the agent is idle), and unavailable otherwise. A member of this
// node is still waited for as its pane closes here.
func TestREST_DeleteWaitsForTheOwningNodesReport(t *testing.T) {
	remote := v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "far", UID: "u-far"}, Status: v1alpha1.MemberStatus{NodeName: "b", PaneID: "w1:p2"}}
	busy := remote
	busy.Status.AgentStatus = "working"
	local := v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "near"}, Status: v1alpha1.MemberStatus{NodeName: "a", PaneID: "w1:p2"}}
	for _, tc := range []struct {
		name       string
		member     v1alpha1.Member
		report     bool // the owning node reports
		paneGone   bool // this node's controllers report pane w1:p2 closed
		wantStatus int
		wantAsked  bool
	}{
		{"remote, reported", remote, true, false, http.StatusOK, true},
		{"remote, no report in time", remote, false, true, http.StatusServiceUnavailable, true},
		{"remote and busy, no report in time", busy, false, true, http.StatusOK, true},
		{"local, its pane closed", local, false, true, http.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				waiter := nodeReports{reported: make(chan struct{}), asked: make(chan v1alpha1.Member, 1)}
				h, err := NewHandler(Options{Members: fakeMembers{tc.member.Name: tc.member}, Tokens: fakeTokens{"primary-secret": {Role: "primary"}},
					Store: deletingStore{}, Waiter: waiter, Node: "a"})
				if err != nil {
					t.Fatal(err)
				}
				rec := httptest.NewRecorder()
				done := make(chan struct{})
				start := time.Now()
				go func() {
					defer close(done)
					req := httptest.NewRequest("DELETE", "/members/"+tc.member.Name+"?wait=true", nil)
					req.Header.Set("Authorization", "Bearer primary-secret")
					h.ServeHTTP(rec, req)
				}()
				synctest.Wait()
				if tc.paneGone {
					h.PaneGone("w1:p2")
				}
				if tc.report {
					close(waiter.reported)
				}
				<-done
				if rec.Code != tc.wantStatus {
					t.Errorf("DELETE ?wait=true = %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
				}
				var res WriteResult
				json.Unmarshal(rec.Body.Bytes(), &res)
				var body APIError
				json.Unmarshal(rec.Body.Bytes(), &body)
				late := !tc.report && tc.member.Name == "far"
				switch {
				case late && time.Since(start) != DefaultStopTimeout:
					t.Errorf("answered after %s; want %s without the report", time.Since(start), DefaultStopTimeout)
				case late && tc.wantStatus == http.StatusServiceUnavailable && !strings.Contains(body.Error.Message, "node b"):
					t.Errorf("after %s: %s; want unavailable, naming node b", time.Since(start), rec.Body)
				case res.Terminating != (late && tc.wantStatus == http.StatusOK):
					t.Errorf("%s; want terminating only for a busy member without the report", rec.Body)
				}
				select {
				case m := <-waiter.asked:
					if !tc.wantAsked || m.UID != tc.member.UID || m.Status.NodeName != "b" {
						t.Errorf("asked node reports for %+v", m)
					}
				default:
					if tc.wantAsked {
						t.Error("the owning node's report was not waited for")
					}
				}
			})
		})
	}
}

// bridge_stop and DELETE with force of a member another node runs are
// refused, naming that node, and delete nothing.
func TestREST_ForcedDeleteOfAnotherNodesMemberIsRefused(t *testing.T) {
	remote := v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "far", UID: "u-far"}, Status: v1alpha1.MemberStatus{NodeName: "b", PaneID: "w1:p2"}}
	busy := remote
	busy.Status.AgentStatus = "working"
	h, err := NewHandler(Options{Members: fakeMembers{"far": remote}, Tokens: fakeTokens{"primary-secret": {Role: "primary"}},
		Store: refusingDeletes{t}, Node: "a", Expediter: expediteNothing{}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("DELETE", "/members/far?now=true", nil)
	req.Header.Set("Authorization", "Bearer primary-secret")
	h.ServeHTTP(rec, req)
	var body APIError
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusBadRequest || body.Error.Code != codeInvalidArgument || !strings.Contains(body.Error.Message, "runs on node b") {
		t.Errorf("DELETE ?now=true of node b's member = %d %s; want 400 invalid_argument naming node b", rec.Code, rec.Body)
	}
}

// refusingDeletes fails the test on a delete.
type refusingDeletes struct {
	t *testing.T
}

func (refusingDeletes) Get(string, string) (v1alpha1.Object, bool)   { return nil, false }
func (refusingDeletes) List(string) []v1alpha1.Object                { return nil }
func (refusingDeletes) Apply(context.Context, v1alpha1.Object) error { return nil }
func (s refusingDeletes) Delete(context.Context, string, string) error {
	s.t.Error("deleted a member the stop was refused for")
	return nil
}

// expediteNothing finds nothing to force.
type expediteNothing struct{}

func (expediteNothing) Expedite(string) bool { return false }
