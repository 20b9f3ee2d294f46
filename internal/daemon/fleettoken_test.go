package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// A node says once which primary token it accepts when it is not the one
// in its own primary.token — the node that minted it, how to print it
// there and how to put it here — and never logs a token.
func TestExplainFleetToken(t *testing.T) {
	const own, fleet = "this-nodes-own-token-0123456789abcdefghij", "the-fleets-token-0123456789abcdefghijklmn"
	hash := etcdstore.FleetToken{SHA256: string(tokens.IDOf(fleet)), Node: "laptop"}
	state := statedir.At(t.TempDir())
	for _, tc := range []struct {
		name    string
		fleet   etcdstore.FleetToken
		own     string
		missing bool
		node    string
		want    []string
	}{
		{"own token differs", hash, own, false, "buildbox", []string{"level=WARN", "minted by node laptop", "fleetd mcp-config", "is a different token and is not accepted", "copy that node's STATE_DIR/primary.token here (mode 0600)", state.PrimaryToken()}},
		{"no primary.token", hash, "", true, "buildbox", []string{"level=WARN", "minted by node laptop", "this node has no primary.token", "mode 0600"}},
		{"its own", etcdstore.FleetToken{SHA256: string(tokens.IDOf(own)), Node: "buildbox"}, own, false, "buildbox", []string{"level=INFO", "the one in its primary.token"}},
		{"minted here, replaced since", etcdstore.FleetToken{SHA256: string(tokens.IDOf(fleet)), Node: "buildbox"}, own, false, "buildbox", []string{"level=WARN", "this node minted", "delete the hash in etcd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			explainFleetToken(tc.fleet, tc.own, tc.missing, state, tc.node, slog.New(slog.NewTextHandler(&buf, nil)))
			out := buf.String()
			if n := strings.Count(out, "\n"); n != 1 {
				t.Errorf("%d lines logged, want 1:\n%s", n, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("log %q does not say %q", out, w)
				}
			}
			if strings.Contains(out, own) || strings.Contains(out, fleet) {
				t.Errorf("log holds a token: %s", out)
			}
		})
	}
}
