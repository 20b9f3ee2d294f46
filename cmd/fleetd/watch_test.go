package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/labels"
)

func TestWatchPrinter(t *testing.T) {
	m := func(name, phase string, labels map[string]string) json.RawMessage {
		b, _ := json.Marshal(v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name, Labels: labels}, Status: v1alpha1.MemberStatus{Phase: phase}})
		return b
	}
	qa, dev := map[string]string{"team": "qa"}, map[string]string{"team": "dev"}
	events := []struct {
		typ string
		obj json.RawMessage
	}{
		{"ADDED", m("b", "Ready", qa)},
		{"ADDED", m("a", "Pending", qa)},
		{"ADDED", m("x", "Ready", dev)},
		{"SYNCED", nil},
		{"MODIFIED", m("a", "Terminating", qa)},
		{"MODIFIED", m("x", "Failed", dev)}, // never selected: nothing
		{"MODIFIED", m("b", "Ready", dev)},  // no longer selected: leaves
		{"MODIFIED", m("x", "Ready", qa)},   // now selected: joins
		{"DELETED", m("a", "Terminating", qa)},
		{"FUTURE", m("a", "x", qa)}, // an event type of a later fleetd: ignored
	}
	sel, err := labels.Parse("team=qa")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		output string
		events bool
		only   string // a member by name
		want   string
	}{
		{"table with events", "", true, "", `
EVENT      NAME   PHASE         AGENT     PANE   RESTARTS   AGE
ADDED      a      Pending       -         -      0          -
ADDED      b      Ready         -         -      0          -
MODIFIED   a      Terminating   -         -      0          -
DELETED    b      Ready         -         -      0          -
ADDED      x      Ready         -         -      0          -
DELETED    a      Terminating   -         -      0          -
`},
		{"table", "", false, "", `
NAME   PHASE         AGENT     PANE   RESTARTS   AGE
a      Pending       -         -      0          -
b      Ready         -         -      0          -
a      Terminating   -         -      0          -
b      Ready         -         -      0          -
x      Ready         -         -      0          -
a      Terminating   -         -      0          -
`},
		{"name with events", "name", true, "", `
ADDED member/a
ADDED member/b
MODIFIED member/a
DELETED member/b
ADDED member/x
DELETED member/a
`},
		{"one member", "name", true, "a", `
ADDED member/a
MODIFIED member/a
DELETED member/a
`},
		{"jsonpath", "jsonpath={.metadata.name}:{.status.phase} ", false, "", `
a:Pending b:Ready a:Terminating b:Ready x:Ready a:Terminating `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseOutput(tt.output)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			p := &watchPrinter{spec: watchSpec{name: tt.only, sel: sel, sortBy: ".metadata.name", format: f, events: tt.events}, w: &out,
				now: func() time.Time { return printNow }, shown: map[string]bool{}}
			for _, e := range events {
				if err := p.event(e.typ, e.obj); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(strings.TrimPrefix(tt.want, "\n"), out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWatchPrinter_ErrorEventEndsTheWatch(t *testing.T) {
	p := &watchPrinter{w: &strings.Builder{}, now: time.Now, shown: map[string]bool{}}
	err := p.event("ERROR", json.RawMessage(`{"error":{"code":"too_slow","message":"this watch fell behind"}}`))
	if err == nil || err.Error() != "fleetd ended the watch: this watch fell behind (too_slow)" {
		t.Errorf("err = %v", err)
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
