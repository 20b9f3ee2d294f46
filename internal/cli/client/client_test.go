package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/sse"
	"github.com/fleetd-dev/fleetd/mcp"
)

func TestHTTPError_PrintsTheServersMessageSafe(t *testing.T) {
	e := &HTTPError{Status: 404, Code: "not_found", Message: "member \"x\x1b]52;c;cm0=\x07\x1b[2J\" not found\nnext"}
	if got, want := e.Error(), `member "x" not found\nnext (not_found)`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	raw := &HTTPError{Status: 502, Message: "<html>\x1b[5mbad gateway"}
	if got, want := raw.Error(), "HTTP 502: <html>bad gateway"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestErrorText_PrintsTheServersErrorsSafe: the server's message in
// apply's and delete's one-line errors cannot move the cursor or break the
// line.
func TestErrorText_PrintsTheServersErrorsSafe(t *testing.T) {
	err := &HTTPError{Status: 403, Code: "subscription_boundary", Message: "tenant \"a\x1b]52;c;cm0=\x07\x1b[1A\" is\nnot connected"}
	if got, want := ErrorText(err), `subscription_boundary: tenant "a" is\nnot connected`; got != want {
		t.Errorf("ErrorText = %q, want %q", got, want)
	}
}

// TestRequests_CarryTheTokenAndReportFleetdsErrors: every request carries
// the bearer token; fleetd's error answer is an *HTTPError with its code
// word, and a 404 is IsNotFound.
func TestRequests_CarryTheTokenAndReportFleetdsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"code":"not_found","message":"member \"ghost\" not found"}}`))
	}))
	defer srv.Close()
	c := New(srv.URL+"/", "tok")
	_, err := c.Member(context.Background(), "ghost")
	var nm *NoMemberError
	if !errors.As(err, &nm) || nm.Ref != "ghost" || err.Error() != `no member with name, pane id, terminal id or session id "ghost"` {
		t.Errorf("Member(ghost) = %v, want a *NoMemberError", err)
	}
	_, found, err := c.Live(context.Background(), "Member", "ghost")
	if found || err != nil {
		t.Errorf("Live(Member, ghost) = found %v, %v; want not found, no error", found, err)
	}
	_, err = c.DeleteMember(context.Background(), "ghost", false)
	var he *HTTPError
	if !errors.As(err, &he) || !IsNotFound(err) || he.Code != "not_found" {
		t.Errorf("DeleteMember(ghost) = %#v", err)
	}
	if _, err := New(srv.URL, "wrong").Logs(context.Background(), "ghost", 0); !errors.As(err, &he) || he.Status != http.StatusUnauthorized {
		t.Errorf("Logs with a wrong token = %v, want a 401", err)
	}
}

// logsFleetd serves a log follow whose stream is body.
func logsFleetd(t *testing.T, body string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("follow") != "1" || r.URL.Query().Get("lines") != "2" {
			http.Error(w, "bad query "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return New(srv.URL, "tok")
}

func TestFollowLogs(t *testing.T) {
	event := func(name, data string) string {
		b, err := sse.Append(nil, sse.Event{Name: name, Data: []byte(data)})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	lines := event("lines", `{"lines":["a","b"]}`) + ": heartbeat\n\n" + event("later", "{}") + event("lines", `{"lines":["c"]}`)
	for _, tt := range []struct {
		name      string
		body      string
		wantLines []string
		wantErr   string
		wantIs    error
	}{
		{"deleted", lines + event("gone", `{"code":"not_found","message":"member x was deleted"}`), []string{"a", "b", "c"}, "", ErrMemberGone},
		{"an error", lines + event("error", `{"code":"unavailable","message":"herdr is gone"}`), []string{"a", "b", "c"}, "herdr is gone (unavailable)", nil},
		{"the stream ends", lines, []string{"a", "b", "c"}, "fleetd ended the stream (was it stopped?)", nil},
		{"a bad frame", event("lines", "{"), nil, "decode a lines event: ", nil},
		{"an event over the bound", event("lines", strings.Repeat("x", maxLogEvent)), nil, "an event longer than 8388608 bytes", sse.ErrTooLong},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := logsFleetd(t, tt.body).FollowLogs(context.Background(), "x", 2, func(f mcp.LogFrame) { got = append(got, f.Lines...) })
			if diff := cmp.Diff(tt.wantLines, got); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if err == nil || (tt.wantErr != "" && !strings.HasPrefix(err.Error(), tt.wantErr)) || (tt.wantIs != nil && !errors.Is(err, tt.wantIs)) {
				t.Errorf("FollowLogs = %v, want %q (matching %v)", err, tt.wantErr, tt.wantIs)
			}
		})
	}
}

// TestObjects_TakeEveryKindsPath: Apply, Live and DeleteObject reach
// /members, /profiles and /tenants by the object's kind, and Apply reads
// the result of either write answer.
func TestObjects_TakeEveryKindsPath(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI())
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/tenants/ghost":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"code":"not_found","message":"Tenant \"ghost\" not found"}}`))
		case r.Method == http.MethodGet:
			w.Write([]byte(`{"apiVersion":"fleetd.dev/v1alpha1","kind":"Profile","metadata":{"name":"claude"},"spec":{"harness":"claude"}}`))
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"result":"created","kind":"Profile","name":"claude"}`))
		default:
			w.Write([]byte(`{"result":"deleted"}`))
		}
	}))
	defer srv.Close()
	c := New(srv.URL, "tok")
	ctx := context.Background()
	p := &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "claude"}, Spec: v1alpha1.ProfileSpec{Harness: "claude"}}
	if res, err := c.Apply(ctx, p, true); err != nil || res != "created" {
		t.Errorf("Apply(profile, dry run) = %q, %v", res, err)
	}
	if live, found, err := c.Live(ctx, v1alpha1.KindProfile, "claude"); err != nil || !found || live.(*v1alpha1.Profile).Spec.Harness != "claude" {
		t.Errorf("Live(Profile, claude) = %+v, %v, %v", live, found, err)
	}
	if _, found, err := c.Live(ctx, v1alpha1.KindTenant, "ghost"); found || err != nil {
		t.Errorf("Live(Tenant, ghost) = found %v, %v; want not found, no error", found, err)
	}
	if err := c.DeleteObject(ctx, v1alpha1.KindTenant, "acme"); err != nil {
		t.Errorf("DeleteObject(Tenant, acme) = %v", err)
	}
	want := []string{"POST /profiles?dryRun=All", "GET /profiles/claude", "GET /tenants/ghost", "DELETE /tenants/acme"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
