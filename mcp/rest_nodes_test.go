package mcp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// twoNodes is a NodeSource of two registered nodes.
type twoNodes struct{}

func (twoNodes) Nodes() []v1alpha1.Node {
	return []v1alpha1.Node{
		{ObjectMeta: v1alpha1.ObjectMeta{Name: "buildbox", Labels: map[string]string{"gpu": "a100"}}, Status: v1alpha1.NodeStatus{Members: 3}},
		{ObjectMeta: v1alpha1.ObjectMeta{Name: "laptop"}},
	}
}

func (n twoNodes) Node(name string) (v1alpha1.Node, bool) {
	for _, x := range n.Nodes() {
		if x.Name == name {
			return x, true
		}
	}
	return v1alpha1.Node{}, false
}

func TestREST_NodesAreThePrimarysAndNeedTheEtcdStore(t *testing.T) {
	tokens := fakeTokens{"p": {Role: "primary"}, "w": {Role: "worker", Member: "a"}}
	withNodes, err := NewHandler(Options{Members: newLiveFleet(), Tokens: tokens, Nodes: twoNodes{}})
	if err != nil {
		t.Fatal(err)
	}
	without, err := NewHandler(Options{Members: newLiveFleet(), Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	get := func(h http.Handler, path, token string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	code, body := get(withNodes, "/nodes", "p")
	var list NodeList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("GET /nodes: %d %v\n%s", code, err, body)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	if diff := cmp.Diff([]string{"buildbox", "laptop"}, names); diff != "" || list.Kind != "NodeList" || list.APIVersion != v1alpha1.GroupVersion {
		t.Errorf("GET /nodes: %s %s, names (-want +got):\n%s", list.APIVersion, list.Kind, diff)
	}
	for _, tt := range []struct {
		name        string
		h           http.Handler
		path, token string
		wantCode    int
		wantBody    string
	}{
		{"one node", withNodes, "/nodes/buildbox", "p", 200, `"members": 3`},
		{"an unknown node", withNodes, "/nodes/nope", "p", 404, `node \"nope\" is not registered`},
		{"a worker's list", withNodes, "/nodes", "w", 403, "only the primary may read them"},
		{"a worker's node", withNodes, "/nodes/laptop", "w", 403, "only the primary may read them"},
		{"no token", withNodes, "/nodes", "", 401, ""},
		{"the directory store's list", without, "/nodes", "p", 404, "nodes exist only with --store etcd"},
		{"the directory store's node", without, "/nodes/laptop", "p", 404, "nodes exist only with --store etcd"},
	} {
		code, body := get(tt.h, tt.path, tt.token)
		if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
			t.Errorf("%s: GET %s: %d %s, want %d with %q", tt.name, tt.path, code, body, tt.wantCode, tt.wantBody)
		}
	}
}
