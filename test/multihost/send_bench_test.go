package multihost

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/mcp"
)

// sendRounds is BenchmarkFleetSend's knob (go test -args; FLEETBENCHARGS
// in make).
var sendRounds = flag.Int("send-rounds", 200, "held bridge_send → reply round trips of BenchmarkFleetSend to each of its two workers")

// BenchmarkFleetSend: the overhead of a held bridge_send → reply across
// nodes against the same on one node. Two fleetd nodes, a and b, on one
// prefix of the loopback etcd, a worker pinned on each; the primary on a's
// gateway sends to the worker on a (same-node, the baseline) and to the
// worker on b (cross-node: the request, the turn and the reply go through
// etcd) in turn, -send-rounds times each, alternating which goes first.
// The simulated agents answer at once with bridge_reply, so each round
// trip is fleetd's own overhead. It reports p50-ms and p90-ms of the
// cross-node sends with the same-node figures as base-… (target: the p50
// ratio ≤ 2).
func BenchmarkFleetSend(b *testing.B) {
	rounds := *sendRounds
	prefix := uniquePrefix("/bench-send")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	putProfile(b, prefix)
	// The primary's tool calls are not rate limited here (ToolCallRate
	// -1): the round trips follow one another as fast as they return.
	node := func(name string) *fleetNode {
		n, _ := runDaemon(b, daemon.Config{Sim: true, SimValidator: validated.Schema(), StateDir: b.TempDir(), ToolCallRate: -1,
			Etcd: &daemon.EtcdConfig{Endpoints: cluster.Endpoints(), Prefix: prefix, Node: name}})
		return n
	}
	na, nb := node("a"), node("b")
	for _, n := range []string{"a", "b"} {
		na.untilNode(b, n, "Ready", nodeReady)
	}
	for _, body := range []string{pinned("near", "a"), pinned("far", "b")} {
		if code, resp := na.do(b, "POST", "/members", body); code != http.StatusCreated {
			b.Fatalf("POST /members = %d %s", code, resp)
		}
	}
	na.waitFor(b, "near ready on a", readyOn("near"))
	nb.waitFor(b, "far ready on b", readyOn("far"))
	primary := na.primary(b, ctx)

	send := func(to string, i int) time.Duration {
		content := fmt.Sprintf("round %d", i)
		start := time.Now()
		out := mustCall[mcp.SendOutput](b, ctx, primary, "bridge_send", map[string]any{"content": content, "sessionId": to, "timeoutMs": 30000})
		took := time.Since(start)
		if out.Outcome != "reply" || out.Text != "echo: "+content {
			b.Fatalf("bridge_send to %s = %+v, want the reply echo: %s", to, out, content)
		}
		return took
	}
	for i := range 5 { // warm both paths (sessions, watches, leases)
		send("near", -1-i)
		send("far", -1-i)
	}
	b.ResetTimer()
	for range b.N {
		var near, far []time.Duration
		for i := range rounds {
			if i%2 == 0 {
				near = append(near, send("near", i))
				far = append(far, send("far", i))
			} else {
				far = append(far, send("far", i))
				near = append(near, send("near", i))
			}
		}
		b.ReportMetric(quantileMS(far, 0.5), "p50-ms")
		b.ReportMetric(quantileMS(near, 0.5), "base-p50-ms")
		b.ReportMetric(quantileMS(far, 0.9), "p90-ms")
		b.ReportMetric(quantileMS(near, 0.9), "base-p90-ms")
	}
}

// quantileMS is the q-quantile (nearest rank) of ds in milliseconds.
func quantileMS(ds []time.Duration, q float64) float64 {
	s := slices.Sorted(slices.Values(ds))
	i := min(int(q*float64(len(s))), len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
}
