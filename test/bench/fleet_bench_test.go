package bench

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// Knobs of the fleet benchmarks (go test -args, or BENCHFLAGS in make).
var (
	latency    = flag.Duration("latency", time.Millisecond, "latency injected into every fake herdr call")
	pollInt    = flag.Duration("poll", 10*time.Millisecond, "agent readiness poll interval (fleetd's PollInterval and the baselines')")
	sizes      = flag.String("sizes", "100,500,1000", "fleet sizes of BenchmarkConvergence with agents ready at once")
	readyDelay = flag.Duration("ready-delay", 3*time.Second, "agent start time (agent.start → interactive-ready, real clock) of BenchmarkConvergence/ready=…; 0 skips those runs")
	readySizes = flag.String("ready-sizes", "100,500", "fleet sizes of BenchmarkConvergence/ready=…")
	readyPoll  = flag.Duration("ready-poll", herdr.DefaultPollInterval, "readiness poll interval of BenchmarkConvergence/ready=… (fleetd's and the baseline's; herdr's CLI polls every 100ms)")
	drift      = flag.Int("drift", 100, "members (one kill each) of BenchmarkDriftRepair")
	mass       = flag.Int("mass", 300, "members (all killed at once) of BenchmarkMassRepair")
	rendezvous = flag.Int("rendezvous", 200, "sends of BenchmarkRendezvous")
	held       = flag.Int("held", 500, "simultaneous held calls of BenchmarkHeldSends")
)

// reportPair reports a figure and its baseline; cmd/benchtable shows them
// side by side with their ratio.
func reportPair(b *testing.B, unit string, v, base float64) {
	b.ReportMetric(v, unit)
	b.ReportMetric(base, "base-"+unit)
}

// reportCalls reports herdr calls per member by method, fleetd's next to the
// baseline's, plus the total.
func reportCalls(b *testing.B, calls, base map[string]int, n int) {
	methods := map[string]bool{}
	for m := range calls {
		methods[m] = true
	}
	for m := range base {
		methods[m] = true
	}
	fc, bc := perMember(calls, n), perMember(base, n)
	for m := range methods {
		reportPair(b, "calls:"+m+"/member", fc[m], bc[m])
	}
	reportPair(b, "calls/member", float64(total(calls))/float64(n), float64(total(base))/float64(n))
}

// BenchmarkConvergence: wall time for N members to become Ready from an
// empty herdr, each herdr call taking -latency, and herdr calls per member
// by method, in two settings:
//
//   - members=N (-sizes): agents ready as soon as agent.start is answered,
//     against the strictly needed calls with fleetd's concurrency (as many
//     goroutines as fleetd has workers);
//   - ready=D/members=N (-ready-sizes, -ready-delay): agents ready D after
//     agent.start, as herdr's agents are (a 3 s settle plus detection), on
//     the real clock — the figure is real time — against a bare client that
//     starts every member at once (tab.create, agent.start, readiness
//     polling every -ready-poll, one goroutine per member).
func BenchmarkConvergence(b *testing.B) {
	for _, n := range parseSizes(b, "-sizes", *sizes) {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			benchConvergence(b, convergenceConfig{members: n, latency: *latency, poll: *pollInt, baseWorkers: controllers.DefaultWorkers})
		})
	}
	if *readyDelay <= 0 {
		return
	}
	for _, n := range parseSizes(b, "-ready-sizes", *readySizes) {
		b.Run(fmt.Sprintf("ready=%s/members=%d", *readyDelay, n), func(b *testing.B) {
			benchConvergence(b, convergenceConfig{members: n, latency: *latency, poll: *readyPoll, ready: *readyDelay})
		})
	}
}

func benchConvergence(b *testing.B, cfg convergenceConfig) {
	for range b.N {
		r := measureConvergence(b, cfg)
		reportPair(b, "wall-ms", ms(r.wall), ms(r.baseWall))
		reportPair(b, "cpu-ms", ms(r.cpu), ms(r.baseCPU))
		reportCalls(b, r.calls, r.baseCalls, cfg.members)
	}
}

// parseSizes reads a comma-separated list of fleet sizes ("" is none).
func parseSizes(b *testing.B, flagName, list string) []int {
	var out []int
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
			b.Fatalf("bad %s entry %q: want a positive number of members", flagName, s)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkIdleResync: herdr calls per resync interval of a converged, idle
// fleet of 200 members, against the same fleet of 50 (the figure must not
// grow with N), over 3 intervals each.
func BenchmarkIdleResync(b *testing.B) {
	const intervals = 3
	perInterval := func(n int) (float64, map[string]float64) {
		f := startIdleFleet(b, n, *latency)
		got := f.resyncIntervals(b, intervals)
		f.stop()
		byMethod := map[string]float64{}
		sum := 0
		for _, d := range got {
			sum += total(d)
			for m, c := range d {
				byMethod[m] += float64(c) / intervals
			}
		}
		return float64(sum) / intervals, byMethod
	}
	for range b.N {
		big, bigBy := perInterval(200)
		small, smallBy := perInterval(50)
		reportPair(b, "calls/interval", big, small)
		methods := map[string]bool{}
		for m := range bigBy {
			methods[m] = true
		}
		for m := range smallBy {
			methods[m] = true
		}
		for m := range methods {
			reportPair(b, "calls:"+m+"/interval", bigBy[m], smallBy[m])
		}
	}
}

// BenchmarkDriftRepair: a member's pane is killed; time until the
// replacement tab.create reaches herdr, p50 and p99 over -drift kills,
// against a bare client that follows pane.exited and recreates: killing
// its next pane at once (p50-ms, p99-ms), and after the pause fleetd had
// before the same kill (paced-): how long a machine idled before a kill
// sets how fast it runs the repair.
func BenchmarkDriftRepair(b *testing.B) {
	for range b.N {
		r := measureDriftRepair(b, *drift, *latency, *pollInt)
		for _, p := range []float64{50, 99} {
			reportPair(b, fmt.Sprintf("p%g-ms", p), ms(percentile(r.fleetd, p)), ms(percentile(r.base, p)))
			reportPair(b, fmt.Sprintf("paced-p%g-ms", p), ms(percentile(r.fleetd, p)), ms(percentile(r.paced, p)))
		}
	}
}

// BenchmarkMassRepair: every member's pane is killed at once; time until
// all replacement tab.create calls reach herdr (all-ms) and until every
// member is Ready again on its new pane (ready-ms), against a bare client
// that follows pane.exited and recreates every member's tab and agent at
// once.
func BenchmarkMassRepair(b *testing.B) {
	for range b.N {
		r := measureMassRepair(b, *mass, *latency, *pollInt)
		reportPair(b, "ready-ms", ms(r.ready), ms(r.baseReady))
		reportPair(b, "all-ms", ms(r.tabs), ms(r.baseTabs))
	}
}

// BenchmarkRendezvous: bridge_send → the worker replies at once → result,
// p50/p99 over -rendezvous sends, with the herdr calls per send by method;
// the baseline is the floor of that path (the two MCP round trips and one
// herdr call).
func BenchmarkRendezvous(b *testing.B) {
	for range b.N {
		fleetd, base, calls := measureRendezvous(b, *rendezvous, *latency)
		for _, p := range []float64{50, 99} {
			reportPair(b, fmt.Sprintf("p%g-ms", p), ms(percentile(fleetd, p)), ms(percentile(base, p)))
		}
		for m, c := range calls {
			b.ReportMetric(float64(c)/float64(*rendezvous), "calls:"+m+"/op")
		}
		b.ReportMetric(float64(total(calls))/float64(*rendezvous), "calls/op")
	}
}

// BenchmarkHeldSends: -held bridge_send calls at once, all held until they
// time out: errors, outcomes, and the process's growth while they are held
// (base- figures: before the calls). With the messaging core's default
// limit of blocking calls per caller, and with it raised to allow them all.
func BenchmarkHeldSends(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts *messaging.Options
	}{
		{"limit=default", nil},
		{fmt.Sprintf("limit=%d", *held), &messaging.Options{MaxWaitersPerCaller: *held}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				r := measureHeld(b, *held, *latency, 3*time.Second, tc.opts)
				if r.firstErr != nil {
					b.Logf("first error: %v", r.firstErr)
				}
				b.ReportMetric(float64(r.errors), "errors")
				b.ReportMetric(float64(r.timeouts), "timeouts")
				b.ReportMetric(r.heapDelta/(1<<20), "heap-growth-MiB")
				b.ReportMetric(r.goroutineDelta, "goroutine-growth")
				b.ReportMetric(r.heapDelta/float64(*held)/1024, "heap-KiB/call")
			}
		})
	}
}
