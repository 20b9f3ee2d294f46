package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/mcp"
)

// A worker flooding the primary's mailbox through the gateway is refused
// with mailbox_full once it is full, loses nothing already stored, and the
// primary reads the mailbox page by page, each message once.
func TestGateway_WorkerFloodIsRefusedAndTheMailboxPaged(t *testing.T) {
	t.Parallel()
	f := startFleetWith(t, "", &messaging.Options{PickupGrace: 10 * time.Minute, MaxMailboxMessages: 5})
	w := f.spawn("flooder")
	big := strings.Repeat("x", 200<<10)
	for i := range 5 {
		callOK[mcp.ReplyOutput](f, w.sess, "bridge_reply", map[string]any{"content": fmt.Sprintf("%d:%s", i, big), "final": false})
	}
	if _, err := call[mcp.ReplyOutput](f.ctx, w.sess, "bridge_reply", map[string]any{"content": "one too many"}); err == nil || err.Code != "mailbox_full" {
		t.Fatalf("reply into a full mailbox: %v, want mailbox_full", err)
	}
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		args := map[string]any{"limit": 2}
		if cursor != "" {
			args["cursor"] = cursor
		}
		p := callOK[mcp.PollOutput](f, f.primary, "bridge_poll", args)
		if len(p.Messages) > 2 {
			t.Fatalf("page %d has %d messages, limit 2", page, len(p.Messages))
		}
		for _, m := range p.Messages {
			seen = append(seen, m.Content[:2])
		}
		if p.More == 0 {
			break
		}
		cursor = p.NextCursor
	}
	if got := strings.Join(seen, ","); got != "0:,1:,2:,3:,4:" {
		t.Fatalf("pages returned %s, want each of the five stored messages once, in order", got)
	}
}
