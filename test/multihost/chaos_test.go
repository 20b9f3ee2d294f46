package multihost

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/fleet"
	"github.com/fleetd-dev/fleetd/mcp"
)

// The fleet chaos test's knobs. `make test` runs the short form (the
// defaults: one seed, a few steps); `make chaos` the long form, with the
// same flag names as test/chaos's.
var (
	chaosSeed  = flag.Int64("chaos.seed", 0, "run only this seed of TestFleetChaos (0: -chaos.first and -chaos.seeds)")
	chaosFirst = flag.Int64("chaos.first", 1, "first seed of TestFleetChaos")
	chaosSeeds = flag.Int("chaos.seeds", 1, "how many seeds TestFleetChaos plays, one after another")
	chaosSteps = flag.Int("chaos.steps", 6, "steps of each seed of TestFleetChaos")
)

// chaosMaxMembers bounds the members a schedule keeps applied at once.
const chaosMaxMembers = 6

// The nodes' lease and reschedule grace in the chaos: a node cut off etcd
// closes the members it would lose 3.4 s after its last renewal (its
// fence: TTL + grace − margin), another node may start them after 5 s.
const (
	chaosTTL             = 2 * time.Second
	chaosRescheduleAfter = 3 * time.Second
)

// chaosFenced is how long a node may go without renewing its lease before
// its fence may have closed its free members: its fence deadline, less a
// renewal period (its last renewal may be that old when etcd goes).
var chaosFenced = max(chaosTTL, chaosTTL+chaosRescheduleAfter-min(fleet.FenceCloseTime, chaosRescheduleAfter/2)-
	time.Duration(fleet.FenceClockRate*float64(chaosTTL+chaosRescheduleAfter))) - chaosTTL/3

// TestFleetChaos plays a seeded schedule against three fleetd nodes (each
// on its own herdr) on the package's three-member etcd: nodes killed (cut
// off etcd, then stopped: their lease expires) and started again on their
// state, nodes partitioned from etcd for a while (a black hole, a
// half-open connection or a delay through their proxies: their fence),
// single etcd members stopped and restarted, the quorum lost and restored,
// Members applied and deleted through any running node. After every step
// it checks, waiting for the fleet to settle:
//
//   - at every look while it settles, no member is Ready on two running
//     nodes at once;
//   - every Member applied runs Ready on exactly one running node, whose
//     registration is Ready, with exactly one pane in the running nodes'
//     herdrs, and no pane runs for anything else (never two live panes for
//     one member);
//   - a member whose node stayed up and reached etcd through the step
//     keeps its pane and its restart count (nothing running was recreated
//     or moved);
//   - while a node is partitioned, and until the fleet settled after it,
//     no member's agent runs in two running nodes' herdrs at once (looked
//     at every 5 ms): its fence closed them before another node could
//     start them;
//   - while etcd has no quorum no herdr is asked to create a tab, and no
//     pane closes before the nodes' fence deadline; then one running
//     member's pane is killed, and its node shows the member held
//     (Ready=Unknown, StoreUnavailable) without asking its herdr for a
//     replacement (another node may own the member by now); once the
//     quorum is back it is recreated, on one node. A quorum lost past the
//     fence deadline closes the free members of every node (they start
//     again once it is back), which the step allows.
//
// A failure names its seed and step; rerun one seed with
// `go test -race -run TestFleetChaos ./test/multihost/ -chaos.seed=N -chaos.steps=M`.
func TestFleetChaos(t *testing.T) {
	t.Parallel()
	seeds := []int64{*chaosSeed}
	if *chaosSeed == 0 {
		seeds = nil
		for i := range *chaosSeeds {
			seeds = append(seeds, *chaosFirst+int64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			playFleetChaos(t, seed, *chaosSteps)
		})
	}
}

// fleetChaos is one seed's run.
type fleetChaos struct {
	t    *testing.T
	seed int64
	rng  *rand.Rand
	f    *hostFleet
	want []string // members applied, not deleted
	next int      // the next member's number
	etcd []bool   // etcd member i of cluster is running
	// cluster is the seed's own etcd.
	cluster *etcdtest.Cluster
	steps   []string // what was played, for the failure message
	// killed is the member whose pane the step killed (without quorum),
	// which need not keep its pane.
	killed string
	// fenced: the step cut every node off etcd past its fence deadline
	// (the quorum lost), so no member need keep its pane.
	fenced bool
	// live watches the herdrs for two live agents of one member from a
	// partition until the fleet settled; nil in other steps.
	live *liveAgents
	// partitioned counts the samples live took over the seed's partitions.
	partitioned int
}

func playFleetChaos(t *testing.T, seed int64, steps int) {
	c := &fleetChaos{t: t, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 0x666c656574)), etcd: []bool{true, true, true},
		cluster: ownCluster(t)}
	c.f = newHostFleet(t, "/fleet-chaos", []string{"a", "b", "c"}, &hostOptions{Validate: true,
		NodeTTL: chaosTTL, RescheduleAfter: chaosRescheduleAfter, Cluster: c.cluster})
	c.f.waitAllNodesReady(t)
	for range 2 {
		c.apply()
	}
	c.settle(c.f.state())
	for range steps {
		start := time.Now()
		before := c.f.state()
		c.killed, c.fenced = "", false
		kept := c.play()
		played := time.Now()
		after := c.settle(before)
		if c.live != nil {
			twice, samples := c.live.end()
			c.live, c.partitioned = nil, c.partitioned+samples
			if len(twice) > 0 {
				c.fatalf("two live agents for one member around the partition: %v", twice)
			}
		}
		c.keptPanes(before, after, kept)
		c.steps[len(c.steps)-1] += fmt.Sprintf(" (%s, settled in %s)", played.Sub(start).Round(time.Millisecond), time.Since(played).Round(time.Millisecond))
	}
	t.Logf("seed %d: %s", seed, strings.Join(c.steps, ", "))
	if c.partitioned > 0 {
		t.Logf("seed %d: the herdrs looked at %d times around its partitions, never with two live agents for one member", seed, c.partitioned)
	}
}

func (c *fleetChaos) fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("seed %d after %s: %s", c.seed, strings.Join(c.steps, ", "), fmt.Sprintf(format, args...))
}

// play plays one step and returns the hosts that stayed up through it
// (their members must keep their panes).
func (c *fleetChaos) play() (kept []string) {
	c.t.Helper()
	up, down := c.f.up(), c.downHosts()
	running := 0
	for _, r := range c.etcd {
		if r {
			running++
		}
	}
	type action struct {
		name   string
		weight int
		ok     bool
		do     func()
	}
	var victim *fleetHost
	actions := []action{
		{"apply", 3, len(c.want) < chaosMaxMembers, func() { c.apply() }},
		{"delete", 2, len(c.want) > 0, func() { c.remove() }},
		{"kill node", 2, len(up) > 1, func() {
			victim = up[c.rng.IntN(len(up))]
			var its []string
			for name, ps := range c.f.state().ready {
				if ps[0].Host == victim.name {
					its = append(its, name)
				}
			}
			slices.Sort(its)
			c.log("kill node %s (running %v)", victim.name, its)
			victim.kill()
		}},
		{"restart node", 2, len(down) > 0, func() {
			h := down[c.rng.IntN(len(down))]
			c.log("restart node %s", h.name)
			h.start()
		}},
		{"stop etcd member", 1, running == 3, func() {
			m := c.rng.IntN(3)
			c.log("stop etcd member %d", m)
			c.cluster.Stop(m)
			c.etcd[m] = false
		}},
		{"restart etcd member", 2, running < 3, func() {
			for m, r := range c.etcd {
				if !r {
					c.log("restart etcd member %d", m)
					if err := c.cluster.Restart(m); err != nil {
						c.fatalf("restart etcd member %d: %v", m, err)
					}
					c.etcd[m] = true
				}
			}
		}},
		{"lose the quorum", 1, true, func() { c.loseQuorum() }},
		{"partition node", 2, len(up) > 1 && running == 3, func() {
			victim = up[c.rng.IntN(len(up))]
			c.partition(victim)
		}},
	}
	total := 0
	for _, a := range actions {
		if a.ok {
			total += a.weight
		}
	}
	pick := c.rng.IntN(total)
	for _, a := range actions {
		if !a.ok {
			continue
		}
		if pick < a.weight {
			a.do()
			break
		}
		pick -= a.weight
	}
	for _, h := range up {
		if h != victim && !c.fenced {
			kept = append(kept, h.name)
		}
	}
	return kept
}

// partition cuts node h off etcd — a black hole, a half-open connection or
// a delay longer than its lease — for a while picked from a little under
// its hold to past the moment another node may take its members over,
// then ends the fault; a watch of the running nodes' herdrs fails the
// step if it sees a member's agent in two of them at once, until the
// fleet settled.
func (c *fleetChaos) partition(h *fleetHost) {
	c.t.Helper()
	faults := []struct {
		name  string
		apply func(*etcdtest.Proxy)
	}{
		{"black hole", (*etcdtest.Proxy).BlackHole},
		{"half-open", (*etcdtest.Proxy).HalfOpen},
		{"delay 3s", func(p *etcdtest.Proxy) { p.Delay(3 * time.Second) }},
	}
	fault := faults[c.rng.IntN(len(faults))]
	d := time.Duration(c.rng.Int64N(int64(chaosTTL+chaosRescheduleAfter+3*time.Second-time.Second))) + time.Second
	c.log("partition node %s from etcd (%s) for %s", h.name, fault.name, d.Round(time.Millisecond))
	c.live = watchLiveAgents(c.f, nil)
	start := time.Now()
	h.fault(fault.apply)
	time.Sleep(d) // the fault's length: what the step plays, not a wait for a condition
	h.fault((*etcdtest.Proxy).Pass)
	// The node's fence may still close what it could lose at its deadline
	// (at most chaosFenced + chaosTTL/3 after the fault began: its last
	// renewal was no later), which can fall after the fault ended but
	// before the node has confirmed its bindings again. The step lasts
	// until then, and a second more for the close to reach herdr, so that
	// such a close is this step's — the victim is no node that stayed up,
	// and the settle waits for its members to run again — not the next's.
	time.Sleep(time.Until(start.Add(chaosFenced + chaosTTL/3 + time.Second)))
}

func (c *fleetChaos) log(format string, args ...any) {
	c.steps = append(c.steps, fmt.Sprintf(format, args...))
}

func (c *fleetChaos) downHosts() []*fleetHost {
	var out []*fleetHost
	for _, h := range c.f.hosts {
		if h.running() == nil {
			out = append(out, h)
		}
	}
	return out
}

// via is a running node, picked at random, to write through.
func (c *fleetChaos) via() *fleetNode {
	up := c.f.up()
	return up[c.rng.IntN(len(up))].running()
}

func (c *fleetChaos) apply() {
	c.t.Helper()
	name := fmt.Sprintf("m%d", c.next)
	c.next++
	c.log("apply %s", name)
	c.write("POST", "/members", `{"profile":"claude","name":"`+name+`"}`, http.StatusCreated, http.StatusOK)
	c.want = append(c.want, name)
}

func (c *fleetChaos) remove() {
	c.t.Helper()
	name := c.want[c.rng.IntN(len(c.want))]
	c.log("delete %s", name)
	c.write("DELETE", "/members/"+name, "", http.StatusOK, http.StatusNotFound)
	c.want = slices.DeleteFunc(c.want, func(n string) bool { return n == name })
}

// write sends a write through a running node picked at random, until it
// answers first (or, once a try was refused, again: the refused try may
// have been written) within 15 s. A write etcd does not take in time (an
// election under way after an etcd member stopped) is refused with 503,
// and nothing is known to be written: the client tries again, as a user
// would; any other answer fails the test.
func (c *fleetChaos) write(method, path, body string, first, again int) {
	c.t.Helper()
	n := c.via()
	want := first
	deadline := time.Now().Add(15 * time.Second)
	for tries := 1; ; tries++ {
		code, resp := n.do(c.t, method, path, body)
		switch {
		case code == want || code == first:
			if tries > 1 {
				c.steps[len(c.steps)-1] += fmt.Sprintf(" (%d tries)", tries)
			}
			return
		case code != http.StatusServiceUnavailable:
			c.fatalf("%s %s = %d %s", method, path, code, resp)
		case time.Now().After(deadline):
			c.fatalf("%s %s still refused after 15 s: %d %s", method, path, code, resp)
		}
		want = again
		time.Sleep(50 * time.Millisecond)
	}
}

// loseQuorum stops etcd members until two of three are down, checks that
// while the running nodes see etcd unavailable nothing is created or
// closed in any herdr and writes are refused, then restarts them all.
func (c *fleetChaos) loseQuorum() {
	c.t.Helper()
	var stopped []int
	for m, r := range c.etcd {
		if r && len(stopped) < 2-c.downEtcd() {
			stopped = append(stopped, m)
		}
	}
	c.log("lose the quorum (stop etcd members %v)", stopped)
	marks, panes := map[string]int{}, map[string]map[string][]string{}
	for _, h := range c.f.hosts {
		marks[h.name], panes[h.name] = h.mark(), h.panes()
	}
	// The nodes' renewals may fail from the first stop on (an embedded
	// member's stop takes about a second, during which it stops answering),
	// so their fence deadlines count from before it, not from after the
	// last: the check below gave them up to two seconds too many (seed 3
	// found the fence's close "before any fence deadline").
	lost := time.Now()
	for _, m := range stopped {
		c.cluster.Stop(m)
		c.etcd[m] = false
	}
	for _, h := range c.f.up() {
		n := h.running()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, _ := n.do(c.t, "GET", "/readyz", "")
			if code != http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				c.fatalf("node %s still ready 30 s after etcd lost its quorum", h.name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if code, body := c.via().do(c.t, "POST", "/members", `{"profile":"claude","name":"refused"}`); code != http.StatusServiceUnavailable {
		c.fatalf("POST /members without quorum = %d %s, want 503", code, body)
	}
	for _, h := range c.f.hosts {
		if made := h.tabsCreatedSince(marks[h.name]); len(made) != 0 {
			c.fatalf("%s's herdr was asked to create tabs while etcd had no quorum: %v", h.name, made)
		}
		if now := h.panes(); !mapsEqual(now, panes[h.name]) && time.Since(lost) < chaosFenced {
			c.fatalf("%s's panes changed while etcd had no quorum, before any fence deadline: %v, then %v", h.name, panes[h.name], now)
		}
	}
	seen := time.Now()
	c.killPaneWithoutQuorum()
	c.fenced = time.Since(lost) >= chaosFenced
	if err := c.cluster.RestartAll(); err != nil {
		c.fatalf("restore the quorum: %v", err)
	}
	c.steps[len(c.steps)-1] += fmt.Sprintf(" [seen by every node in %s, restored in %s]", seen.Sub(lost).Round(time.Millisecond), time.Since(seen).Round(time.Millisecond))
	for m := range c.etcd {
		c.etcd[m] = true
	}
}

func (c *fleetChaos) downEtcd() int {
	n := 0
	for _, r := range c.etcd {
		if !r {
			n++
		}
	}
	return n
}

// settle waits until the fleet runs exactly the wanted members, each on
// one Ready node.
func (c *fleetChaos) settle(before fleetState) fleetState {
	c.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		s := c.f.state()
		if two := s.twoReady(); len(two) > 0 {
			c.fatalf("Ready on two running nodes at once: %v", two)
		}
		why := s.converged(c.want)
		if why == "" {
			why = c.nodesReady(s)
		}
		if why == "" {
			return s
		}
		if time.Now().After(deadline) {
			c.fatalf("not settled within 45 s: %s", why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// nodesReady says which node running a member is not Ready in the
// registrations a running node reads; "" when all are.
func (c *fleetChaos) nodesReady(s fleetState) string {
	up := c.f.up()
	var nodes []v1alpha1.Node
	code, body := up[0].running().do(c.t, "GET", "/nodes", "")
	if code != http.StatusOK || decodeNodes(body, &nodes) != nil {
		return fmt.Sprintf("GET /nodes = %d %s", code, body)
	}
	var why []string
	for name, ps := range s.ready {
		for _, n := range nodes {
			if n.Name == ps[0].Host && n.ReadyCondition().Status != v1alpha1.ConditionTrue {
				why = append(why, fmt.Sprintf("%s runs on %s, which is %+v", name, n.Name, n.ReadyCondition()))
			}
		}
	}
	return strings.Join(why, "; ")
}

// keptPanes checks that every member Ready on a host that stayed up
// through the step still runs there, in the same pane, not restarted.
func (c *fleetChaos) keptPanes(before, after fleetState, kept []string) {
	c.t.Helper()
	for name, ps := range before.ready {
		if !slices.Contains(kept, ps[0].Host) || !slices.Contains(c.want, name) || name == c.killed {
			continue
		}
		if got := after.ready[name]; len(got) != 1 || got[0] != ps[0] {
			c.fatalf("%s ran on %s (pane %s, %d restarts), a node that stayed up; now %+v", name, ps[0].Host, ps[0].Pane, ps[0].Restarts, got)
		}
	}
}

func decodeNodes(body string, out *[]v1alpha1.Node) error {
	var list mcp.NodeList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		return err
	}
	*out = list.Items
	return nil
}

func mapsEqual(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// killPaneWithoutQuorum kills one running member's pane while etcd has no
// quorum, waits until its node shows the member held (Ready=Unknown,
// StoreUnavailable: it saw the pane go and recreates nothing), and fails
// if the node asks its herdr for a replacement meanwhile or within 500 ms
// after.
func (c *fleetChaos) killPaneWithoutQuorum() {
	c.t.Helper()
	s := c.f.state()
	for _, name := range c.want {
		ps := s.ready[name]
		if len(ps) != 1 {
			continue
		}
		h := c.f.host(ps[0].Host)
		c.steps[len(c.steps)-1] += fmt.Sprintf(", kill %s's pane on %s", name, h.name)
		c.killed = name
		mark := h.mark()
		if err := h.herdr.KillPane(ps[0].Pane); err != nil {
			c.fatalf("kill %s's pane: %v", name, err)
		}
		status := func() v1alpha1.Member {
			for _, m := range h.local() {
				if m.Name == name {
					return m
				}
			}
			return v1alpha1.Member{}
		}
		noCreate := func() {
			if made := h.tabsCreatedSince(mark); len(made) != 0 {
				c.fatalf("%s recreated %s's pane while etcd had no quorum: %v; status %+v", h.name, name, made, status().Status)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			noCreate()
			m := status()
			if r := readyOf(m); r.Status == v1alpha1.ConditionUnknown && (r.Reason == v1alpha1.ReasonStoreUnavailable || r.Reason == v1alpha1.ReasonNodeFenced) {
				break // held; or closed by its node's fence, the quorum lost that long
			}
			if time.Now().After(deadline) {
				c.fatalf("%s does not show %s held 10 s after its pane was killed without quorum: %+v", h.name, name, m.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for held := time.Now(); time.Since(held) < 500*time.Millisecond; {
			noCreate()
			time.Sleep(10 * time.Millisecond)
		}
		return
	}
}
