package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// This file holds the faults of issue 12 item 9 (herdr refusing
// connections for a moment, herdr restarting, a slow MCP client, a flood
// from one worker) and the invariants they answer to besides the message
// ledger's: every flood message the gateway accepted reaches the primary
// exactly once and none it refused ever does, and the heap stays within a
// bound set by the fleet's mailbox limits.

// floodMsg is one bridge_reply of a flood, and what became of it.
type floodMsg struct {
	from string
	// result is "accepted" (the gateway acknowledged it), the tool error
	// code that refused it (mailbox_full, rate_limited), or "unknown: …"
	// when the call itself failed and the worker cannot tell.
	result string
	seen   int // times the primary polled it (fresh message ids only)
}

const floodPrefix = "flood-"

// floodKey is the ledger key of flood content: its "flood-<seed>-<n>"
// head, without the padding.
func floodKey(content string) (string, bool) {
	if !strings.HasPrefix(content, floodPrefix) {
		return "", false
	}
	key, _, _ := strings.Cut(content, ":")
	return key, true
}

// floodMail counts a polled message that is flood content; it reports
// whether it was.
func (w *world) floodMail(m messaging.Message) bool {
	key, ok := floodKey(m.Content)
	if !ok {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.floods[key]
	if f == nil {
		w.problems = append(w.problems, fmt.Sprintf("the primary polled flood message %s that nobody sent", key))
		return true
	}
	f.seen++
	if m.Kind != messaging.KindProgress || m.From != f.from {
		w.problems = append(w.problems, fmt.Sprintf("flood message %s from %s arrived as %s from %s", key, f.from, m.Kind, m.From))
	}
	return true
}

// floodWorkers is how many calls a flood has in flight at once.
const floodWorkers = 4

// actFlood makes one member's worker flood the primary's mailbox with
// progress notes (bridge_reply final=false, so that no turn ends) of up to
// maxContent bytes each: tens through the MCP gateway, several at a time,
// far over the tool-call rate, then hundreds straight into the messaging
// core, as a flood the rate lets through over minutes (or many workers'
// together) would arrive, far over the mailbox bounds (one flood offers 2 to 4 MiB). mailbox_full and
// rate_limited are refusals the worker sees, not acknowledgements; an
// accepted note must reach the primary exactly once, and the heap must stay
// within heapBound of what it was before the flood.
func (w *world) actFlood(rng *rand.Rand) string {
	if w.fd == nil {
		return "flood: (fleetd is down)"
	}
	members := w.present()
	if w.hostile != nil {
		// The hostile waiter holds every held call a worker may, and a
		// new MCP session's event stream is one more: refused with 429,
		// as the quota is meant to.
		members = slices.DeleteFunc(members, func(m string) bool { return m == hostileWaiter })
	}
	name, ok := pick(rng, members)
	if !ok {
		return "flood: no members"
	}
	n := 2*toolCallBurst + rng.IntN(2*toolCallBurst)
	direct := 6*maxMailboxMsgs + rng.IntN(6*maxMailboxMsgs)
	size := 1<<10 + rng.IntN(maxContent-2<<10)
	ctx, cancel := context.WithTimeout(w.ctx, 4*probeTimeout)
	defer cancel()
	cs, err := w.fd.gw.connect(ctx, workerToken(name))
	if err != nil {
		w.problem("flood: %s's MCP session could not connect: %v", name, err)
		return "flood: connect failed"
	}
	defer cs.Close()
	keys := make([]string, n+direct)
	results := make([]string, len(keys))
	w.mu.Lock()
	for i := range keys {
		w.nextFlood++
		keys[i] = fmt.Sprintf("%s%d-%d", floodPrefix, w.seed, w.nextFlood)
		w.floods[keys[i]] = &floodMsg{from: name, result: "pending"}
	}
	w.mu.Unlock()
	pad := strings.Repeat("x", size)
	var wg sync.WaitGroup
	for g := range floodWorkers {
		wg.Go(func() {
			for i := g; i < n; i += floodWorkers {
				code, err := callTool(ctx, cs, "bridge_reply", map[string]any{"content": keys[i] + ":" + pad, "final": false}, nil)
				switch {
				case err != nil:
					results[i] = "unknown: " + err.Error()
				case code != "":
					results[i] = code
				default:
					results[i] = "accepted"
				}
			}
		})
	}
	wg.Wait()
	for i := n; i < len(keys); i++ {
		_, err := w.fd.core.Reply(ctx, name, keys[i]+":"+pad, false)
		switch code := messaging.CodeOf(err); {
		case err == nil:
			results[i] = "accepted"
		case code != "":
			results[i] = string(code)
		default:
			results[i] = "unknown: " + err.Error()
		}
	}
	counts := map[string]int{}
	w.mu.Lock()
	for i, key := range keys {
		w.floods[key].result = results[i]
		res, _, _ := strings.Cut(results[i], ":")
		counts[res]++
	}
	w.mu.Unlock()
	w.sampleHeap("after a flood")
	return fmt.Sprintf("%s floods the primary with %d notes of %d bytes (%d through MCP): %v", name, len(keys), len(keys[0])+1+size, n, counts)
}

// actHerdrBlip makes herdr unreachable for a moment: either its socket
// refuses connections for a few milliseconds (herdr stops and comes back
// with its session) or it drops the next few requests unanswered.
func (w *world) actHerdrBlip(rng *rand.Rand) string {
	if w.herdrDown {
		return w.actHerdr(rng)
	}
	if rng.IntN(2) == 0 {
		n := 1 + rng.IntN(8)
		w.fake.InjectFault("", herdrsim.Fault{Drop: true, Times: n})
		return fmt.Sprintf("herdr drops the next %d requests unanswered", n)
	}
	d := time.Duration(1+rng.IntN(20)) * time.Millisecond
	if err := w.fake.Stop(); err != nil {
		w.t.Fatalf("herdr stop: %v", err)
	}
	tm := time.NewTimer(d) // the moment herdr refuses; it paces, decides nothing
	<-tm.C
	w.herdrUp()
	return fmt.Sprintf("herdr refuses connections for %s", d)
}

// actHerdrRestart restarts herdr, its agents dying with it. By default each
// pane comes back (same pane id) with its shell and without its agent,
// whose worker forgets the prompt it was on; fleetd must start the agents
// again without duplicating a pane. The agents' deaths are modelled by
// exiting them while herdr is down and restarting it with its model kept.
//
// With -chaos.restore herdr restarts with session restore instead
// (herdrsim's RestartRestored, herdr 0.9's default): herdr is gone for a
// moment, then every pane comes back under its pane id with a new terminal
// id and its agent relaunched — a new process that forgot the prompt it
// was on. fleetd must adopt the panes without duplicating one and end each
// turn whose prompt the old agent took (turn_done naming the restart),
// while queued messages go to the relaunched agents. It is not the default
// yet: a fleetd that was down while herdr restarted, and first sees a
// relaunched agent already ready, has no evidence that it is a new process
// (see the package doc).
func (w *world) actHerdrRestart(rng *rand.Rand) string {
	if w.herdrDown {
		return w.actHerdr(rng)
	}
	if err := w.fake.Stop(); err != nil {
		w.t.Fatalf("herdr stop: %v", err)
	}
	w.lostAgents() // the agents die, or are relaunched having forgotten their prompts
	if *flagRestore {
		forgot := 0
		for _, p := range w.pendingSorted() {
			w.finish(p)
			forgot++
		}
		// herdr's process is gone for a moment (fleetd reconnects every 5
		// to 50 ms, so it finds the socket refusing), as a real restart is.
		d := time.Duration(100+rng.IntN(200)) * time.Millisecond
		tm := time.NewTimer(d) // the moment herdr is gone; it paces, decides nothing
		<-tm.C
		if err := w.fake.RestartRestored(nil); err != nil {
			w.t.Fatalf("herdr restart with restore: %v", err)
		}
		return fmt.Sprintf("herdr restarts with session restore after %s: %d prompts forgotten by the relaunched agents", d, forgot)
	}
	died := 0
	for _, p := range w.fake.Panes() {
		if p.AgentName != "" && w.fake.ExitAgent(p.ID) == nil {
			died++
		}
	}
	forgot := 0
	for _, p := range w.pendingSorted() {
		w.finish(p)
		forgot++
	}
	w.herdrUp()
	return fmt.Sprintf("herdr restarts: %d agents died with it, %d prompts forgotten", died, forgot)
}

// herdrUp brings a stopped herdr back with its session.
func (w *world) herdrUp() {
	if err := w.fake.Restart(); err != nil {
		w.t.Fatalf("herdr restart: %v", err)
	}
}

// actSlowClient plays the slow MCP client: it starts one, moves it on by
// one step (the rest of its request, a trickle of its answer) or hangs it
// up; each time another session must be served meanwhile (probe), and the
// schedule's messages go on flowing around it.
func (w *world) actSlowClient(rng *rand.Rand) string {
	if w.fd == nil {
		return "slow MCP client: (fleetd is down)"
	}
	if w.slow == nil {
		hold := rng.IntN(2) == 0
		what, err := w.startSlowClient(hold)
		if err != nil {
			w.problem("slow MCP client: %v", err)
			return "slow MCP client failed to start: " + err.Error()
		}
		return fmt.Sprintf("a slow MCP client starts a bridge_poll (held for good: %v; %s); %s", hold, what, w.probe("while a slow client sends its request"))
	}
	if rng.IntN(4) == 0 {
		s := w.slow
		w.slow = nil
		s.close()
		return fmt.Sprintf("slow MCP client hangs up after reading %d bytes; %s", s.read, w.deleteSession(s))
	}
	what, done := w.slow.trickle()
	if done {
		w.slow.close()
		w.slow = nil
	}
	return "slow MCP client " + what + "; " + w.probe("while a slow client holds a call")
}

// heapSlack is what the heap may grow by besides the mailboxes' content:
// fleetd's goroutines, caches and journal buffers, the fake herdr's model
// and event ring, the test's own ledger (a run grows by 1 to 2 MiB). heapBound allows it
// plus a few full mailboxes; a fleet that kept refused content, or let the
// primary's mailbox grow past its bound, goes over within a flood or two.
const heapSlack = 4 << 20

func heapBound() uint64 { return heapSlack + 4*maxMailboxBytes }

// heapInuse is the Go heap in use after a collection.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// sampleHeap notes the heap in use now, keeping the peak.
func (w *world) sampleHeap(when string) {
	h := heapInuse()
	if h > w.heapPeak {
		w.heapPeak, w.heapPeakAt = h, when
	}
}

// checkFaults asserts the invariants of this file's faults; w.mu is held.
func (w *world) checkFaults() {
	var keys []string
	for k := range w.floods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	counts := map[string]int{}
	for _, k := range keys {
		f := w.floods[k]
		res, _, _ := strings.Cut(f.result, ":")
		counts[res]++
		switch {
		case f.result == "accepted" && f.seen != 1:
			w.t.Errorf("flood message %s from %s was accepted (acknowledged to its sender) but reached the primary %d times", k, f.from, f.seen)
		case f.result == string(messaging.CodeMailboxFull) || f.result == "rate_limited":
			if f.seen != 0 {
				w.t.Errorf("flood message %s from %s was refused (%s) yet reached the primary %d times", k, f.from, f.result, f.seen)
			}
		case f.result != "accepted" && f.seen > 1:
			w.t.Errorf("flood message %s from %s (%s) reached the primary %d times", k, f.from, f.result, f.seen)
		}
	}
	grew := int64(w.heapPeak) - int64(w.heapBase)
	if grew > int64(heapBound()) {
		w.t.Errorf("the heap grew by %d bytes (from %d to %d, %s), over the bound of %d (%d slack + 4 mailboxes of %d bytes)",
			grew, w.heapBase, w.heapPeak, w.heapPeakAt, heapBound(), heapSlack, maxMailboxBytes)
	}
	line := fmt.Sprintf("floods: %d notes, %v; heap in use %d KiB at start, peak %d KiB (%s), bound +%d KiB",
		len(keys), counts, w.heapBase>>10, w.heapPeak>>10, w.heapPeakAt, heapBound()>>10)
	w.trace = append(w.trace, line)
	w.t.Log(line)
}
