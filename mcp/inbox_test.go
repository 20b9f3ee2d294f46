package mcp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// mailboxMessenger is fakeMessenger that records whose mailbox was polled
// and acknowledged.
type mailboxMessenger struct {
	fakeMessenger
	polled []string
	acked  map[string][]string
}

func (m *mailboxMessenger) PollPage(ctx context.Context, recipient string, r messaging.PollRequest) (messaging.PollPage, error) {
	m.polled = append(m.polled, recipient)
	return m.fakeMessenger.PollPage(ctx, recipient, r)
}

func (m *mailboxMessenger) Ack(recipient string, ids []string) (int, error) {
	m.acked[recipient] = append(m.acked[recipient], ids...)
	return len(ids), nil
}

// GET /inbox and POST /inbox/ack are bridge_poll and bridge_ack on the
// caller's own mailbox: the query becomes the same poll request, the
// identity the mailbox; bad parameters are 400 with the tool's words.
func TestREST_InboxPollsAndAcksTheCallersMailbox(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	msg := &mailboxMessenger{acked: map[string][]string{}}
	msg.page = messaging.PollPage{Messages: []messaging.Message{
		{ID: "m-1", From: "a", Kind: messaging.KindReply, Content: "done", TurnID: "t-1", CreatedAt: at},
	}, Next: "c1", More: 2}
	srv, _ := startGateway(t, msg)

	code, body := do(t, "GET", srv.URL+"/inbox?wait=true&timeoutMs=1500&limit=10&cursor=c0", "primary-secret", "")
	if code != 200 || !strings.Contains(body, `"from": "a"`) || !strings.Contains(body, `"nextCursor": "c1"`) || !strings.Contains(body, `"more": 2`) {
		t.Fatalf("GET /inbox: %d %s", code, body)
	}
	if code, body := do(t, "GET", srv.URL+"/inbox", "worker-secret", ""); code != 200 {
		t.Fatalf("GET /inbox as a worker: %d %s", code, body)
	}
	want := []messaging.PollRequest{{Cursor: "c0", Limit: 10, Wait: true, Timeout: 1500 * time.Millisecond}, {}}
	if diff := cmp.Diff(want, msg.polls); diff != "" {
		t.Errorf("poll requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{PrimaryName, "a"}, msg.polled); diff != "" {
		t.Errorf("mailboxes polled (-want +got):\n%s", diff)
	}

	if code, body := do(t, "POST", srv.URL+"/inbox/ack", "primary-secret", `{"ids": ["m-1", "m-9"]}`); code != 200 || !strings.Contains(body, `"acked": 2`) {
		t.Errorf("POST /inbox/ack: %d %s", code, body)
	}
	if diff := cmp.Diff(map[string][]string{PrimaryName: {"m-1", "m-9"}}, msg.acked); diff != "" {
		t.Errorf("acknowledged (-want +got):\n%s", diff)
	}

	for _, tt := range []struct{ method, path, body, want string }{
		{"GET", "/inbox?wait=yes", "", "wait"},
		{"GET", "/inbox?limit=1001", "", "limit: 1001 is out of range"},
		{"GET", "/inbox?limit=-1", "", "limit: -1 is out of range"},
		{"GET", "/inbox?timeoutMs=soon", "", "timeoutMs"},
		{"GET", "/inbox?timeoutMs=-5", "", "timeoutMs: -5 is out of range"},
		{"POST", "/inbox/ack", `{"ids": []}`, "ids is empty"},
		{"POST", "/inbox/ack", `{"ids": ["m-1"], "all": true}`, "unknown field"},
		{"POST", "/inbox/ack", `["m-1"]`, "body"},
	} {
		code, body := do(t, tt.method, srv.URL+tt.path, "primary-secret", tt.body)
		if code != 400 || !strings.Contains(body, `"invalid_argument"`) || !strings.Contains(body, tt.want) {
			t.Errorf("%s %s %s: %d %s, want 400 invalid_argument naming %q", tt.method, tt.path, tt.body, code, body, tt.want)
		}
	}
	if code, _ := do(t, "GET", srv.URL+"/inbox", "nope", ""); code != 401 {
		t.Errorf("GET /inbox with an unknown token: %d, want 401", code)
	}
	if len(msg.polls) != 2 {
		t.Errorf("%d polls reached the core, want only the 2 valid ones", len(msg.polls))
	}
}
