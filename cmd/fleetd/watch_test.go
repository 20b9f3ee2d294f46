package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/sse"
)

// watchFleetd serves a member watch that sends events and then ends, and
// GET /members/NAME of the members the events name.
func watchFleetd(t *testing.T, events [][2]string) string {
	t.Helper()
	var stream []byte
	members := map[string]string{}
	for _, e := range events {
		data := `{"type":"` + e[0] + `"}`
		if e[1] != "" {
			data = `{"type":"` + e[0] + `","object":` + e[1] + `}`
			var m v1alpha1.Member
			if err := json.Unmarshal([]byte(e[1]), &m); err == nil && m.Name != "" {
				members[m.Name] = e[1]
			}
		}
		var err error
		if stream, err = sse.Append(stream, sse.Event{Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/members" && r.URL.Query().Get("watch") == "1" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(stream)
			return
		}
		if m, ok := members[strings.TrimPrefix(r.URL.Path, "/members/")]; ok {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, m)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("FLEETD_TOKEN", "t")
	return srv.URL
}

// TestGet_WatchFollowsTheSelectorAndPrintsEachFormat: get -w prints the
// members the stream starts with, sorted, then a line per change of a
// selected member — a member that stops matching leaves the watch as
// DELETED, one that starts joins as ADDED — in every output format.
func TestGet_WatchFollowsTheSelectorAndPrintsEachFormat(t *testing.T) {
	m := func(name, phase string, labels map[string]string) string {
		b, _ := json.Marshal(v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name, Labels: labels}, Status: v1alpha1.MemberStatus{Phase: phase}})
		return string(b)
	}
	qa, dev := map[string]string{"team": "qa"}, map[string]string{"team": "dev"}
	events := [][2]string{
		{"ADDED", m("b", "Ready", qa)},
		{"ADDED", m("a", "Pending", qa)},
		{"ADDED", m("x", "Ready", dev)},
		{"SYNCED", ""},
		{"MODIFIED", m("a", "Terminating", qa)},
		{"MODIFIED", m("x", "Failed", dev)}, // never selected: nothing
		{"MODIFIED", m("b", "Ready", dev)},  // no longer selected: leaves
		{"MODIFIED", m("x", "Ready", qa)},   // now selected: joins
		{"DELETED", m("a", "Terminating", qa)},
		{"FUTURE", m("a", "x", qa)}, // an event type of a later fleetd: ignored
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"table with events", []string{"-l", "team=qa", "--output-watch-events"}, `
EVENT      NAME   PHASE         AGENT     PANE   RESTARTS   AGE
ADDED      a      Pending       -         -      0          -
ADDED      b      Ready         -         -      0          -
MODIFIED   a      Terminating   -         -      0          -
DELETED    b      Ready         -         -      0          -
ADDED      x      Ready         -         -      0          -
DELETED    a      Terminating   -         -      0          -
`},
		{"table", []string{"-l", "team=qa"}, `
NAME   PHASE         AGENT     PANE   RESTARTS   AGE
a      Pending       -         -      0          -
b      Ready         -         -      0          -
a      Terminating   -         -      0          -
b      Ready         -         -      0          -
x      Ready         -         -      0          -
a      Terminating   -         -      0          -
`},
		{"name with events", []string{"-l", "team=qa", "-o", "name", "--output-watch-events"}, `
ADDED member/a
ADDED member/b
MODIFIED member/a
DELETED member/b
ADDED member/x
DELETED member/a
`},
		{"one member", []string{"a", "-o", "name", "--output-watch-events"}, `
ADDED member/a
MODIFIED member/a
DELETED member/a
`},
		{"jsonpath", []string{"-l", "team=qa", "-o", "jsonpath={.metadata.name}:{.status.phase} "}, `
a:Pending b:Ready a:Terminating b:Ready x:Ready a:Terminating `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := watchFleetd(t, events)
			code, stdout, stderr := runCLI(t, append([]string{"get", "members", "-w", "--sort-by", ".metadata.name", "--server", url}, tt.args...)...)
			if diff := cmp.Diff(strings.TrimPrefix(tt.want, "\n"), stdout); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if code != 1 || !strings.Contains(stderr, "ended the watch stream") {
				t.Errorf("exit %d, stderr %q; want 1, the stream ended", code, stderr)
			}
		})
	}
}

func TestGet_WatchErrorEventEndsTheWatch(t *testing.T) {
	url := watchFleetd(t, [][2]string{{"SYNCED", ""}, {"ERROR", `{"error":{"code":"too_slow","message":"this watch fell behind"}}`}})
	code, _, stderr := runCLI(t, "get", "members", "-w", "--server", url)
	if code != 1 || stderr != "fleetd: fleetd ended the watch: this watch fell behind (too_slow)\n" {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestWatch_AnOlderFleetdIsNamed: a fleetd without the watch stream answers
// ?watch=1 with its plain list; the client says so instead of waiting.
func TestWatch_AnOlderFleetdIsNamed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"apiVersion":"fleetd.dev/v1alpha1","kind":"MemberList","items":[]}`)
	}))
	defer srv.Close()
	t.Setenv("FLEETD_TOKEN", "t")
	code, stdout, stderr := runCLI(t, "get", "members", "-w", "--server", srv.URL)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "answered /members?watch=1 with application/json, not an event stream: it is older than this client") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
