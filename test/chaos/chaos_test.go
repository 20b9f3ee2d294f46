package chaos

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
)

var (
	flagSeed  = flag.Int64("chaos.seed", 0, "run only this seed (0: run -chaos.seeds seeds from -chaos.first)")
	flagFirst = flag.Int64("chaos.first", 1, "first seed of the run")
	flagSeeds = flag.Int("chaos.seeds", 3, "number of seeds, one after another")
	flagSteps = flag.Int("chaos.steps", 30, "schedule steps per seed")
	// Off by default: each exposes a known gap (see the package doc).
	flagRunningOnly = flag.Bool("chaos.runningonly", false, "send only to members that are running (by default any listed member)")
	flagUnobserved  = flag.Bool("chaos.unobserved", false, "let workers finish silently before fleetd saw them working")
	flagRestore     = flag.Bool("chaos.restore", false, "herdr restarts with session restore (its agents relaunched) instead of with its agents dead")
	flagIdleDialog  = flag.Bool("chaos.idledialog", false, "let an idle agent stop at a dialog by itself (by default only a working one does)")
)

// pool is every member name the schedule may create.
var pool = []string{"w0", "w1", "w2", "w3", "w4", "w5"}

// settleTimeout bounds the wait for convergence after the schedule. It is
// a bound for a broken fleetd, never a pause: the wait ends when the
// invariants hold.
const settleTimeout = 30 * time.Second

// leakTimeout bounds the wait for the run's goroutines to end after its
// teardown; like settleTimeout it is a bound, never a pause.
const leakTimeout = 10 * time.Second

func TestChaos(t *testing.T) {
	seeds := []int64{*flagSeed}
	if *flagSeed == 0 {
		seeds = seeds[:0]
		for i := range *flagSeeds {
			seeds = append(seeds, *flagFirst+int64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			// Whatever runs now (earlier seeds' leftovers included) is
			// not this run's to answer for.
			before := goleak.IgnoreCurrent()
			w := newWorld(t, seed)
			defer func() { // also after a t.Fatal
				w.teardown()
				if !t.Failed() {
					checkGoroutines(t, before)
				}
				if t.Failed() {
					t.Logf("schedule:\n%s", strings.Join(w.trace, "\n"))
					t.Logf("reproduce: go test -race -run TestChaos ./test/chaos/ -chaos.seed=%d -chaos.steps=%d", seed, *flagSteps)
				}
			}()
			rng := rand.New(rand.NewPCG(uint64(seed), 0x6f6c64))
			w.begin()
			for i := range *flagSteps {
				w.record(fmt.Sprintf("%3d %s", i, w.step(rng)))
				if w.hostile != nil && w.fd != nil {
					w.record("    " + w.probeHostile())
				}
				w.noteUncertain()
			}
			w.settle(rng)
			w.check()
		})
	}
}

func (w *world) record(line string) {
	w.trace = append(w.trace, line)
	if testing.Verbose() {
		w.t.Logf("%6s %s", time.Since(w.start).Round(time.Millisecond), line)
	}
}

// begin writes the first four members and waits for a running fleet.
func (w *world) begin() {
	for _, name := range pool[:4] {
		w.setMember(name, spec{})
	}
	w.startFleetd()
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := w.fd.mgr.WaitFor(ctx, func(ms []v1alpha1.Member) bool { return w.converged(ms) == "" }); err != nil {
		w.t.Fatalf("the initial fleet never converged: %s", w.converged(w.fd.mgr.Members()))
	}
	w.heapBase = heapInuse()
	w.heapPeak, w.heapPeakAt = w.heapBase, "at start"
}

// action is one kind of schedule step; weight is its relative frequency.
type action struct {
	weight int
	do     func(w *world, rng *rand.Rand) string
}

var actions = []action{
	{6, (*world).actSend},
	{3, (*world).actSendHold},
	{8, (*world).actWorker},
	{3, func(w *world, _ *rand.Rand) string { return w.ifUp(w.poll) }},
	{4, (*world).actBreathe},
	{2, (*world).actKillPane},
	{1, (*world).actExitAgent},
	{1, (*world).actBlockAgent},
	{1, (*world).actHerdr},
	{1, (*world).actKillFleetd},
	{1, (*world).actAdd},
	{1, (*world).actDelete},
	{1, (*world).actEdit},
	{1, (*world).actPause},
	// Issue 21's profile change mid-turn (rollout_test.go).
	{2, (*world).actProfile},
	// Issue 12's faults (faults_test.go).
	{1, (*world).actHerdrBlip},
	{1, (*world).actHerdrRestart},
	{2, (*world).actSlowClient},
	{1, (*world).actFlood},
	{1, (*world).actVanishingSender},
	// Issue 24's slow-client fault (hostile_test.go).
	{2, (*world).actHostile},
}

// step plays one random step. A stopped fleetd or herdr usually comes back
// within a few steps, as a supervisor would restart them.
func (w *world) step(rng *rand.Rand) string {
	if w.fd == nil && rng.IntN(3) == 0 {
		w.startFleetd()
		return "start fleetd (adopts what the last one left)"
	}
	if w.herdrDown && rng.IntN(3) == 0 {
		return w.actHerdr(rng)
	}
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	n := rng.IntN(total)
	for _, a := range actions {
		if n < a.weight {
			return a.do(w, rng)
		}
		n -= a.weight
	}
	panic("unreachable")
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (w *world) ifUp(f func() string) string {
	if w.fd == nil {
		return "(fleetd is down)"
	}
	return f()
}

// present lists the members that have a manifest, sorted.
func (w *world) present() []string {
	var out []string
	for _, n := range pool {
		if _, ok := w.desired[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

func pick(rng *rand.Rand, names []string) (string, bool) {
	if len(names) == 0 {
		return "", false
	}
	return names[rng.IntN(len(names))], true
}

func (w *world) actSend(rng *rand.Rand) string {
	return w.ifUp(func() string { return w.sendTo(rng, false) })
}
func (w *world) actSendHold(rng *rand.Rand) string {
	return w.ifUp(func() string { return w.sendTo(rng, true) })
}

// sendTo sends to any member fleetd lists (with -chaos.runningonly: only to
// running ones). A message for a member paused or deleted while it has no
// pane (starting, in restart backoff), or while fleetd is down, must end
// with worker_gone: the daemon reports such workers gone from the desired
// state, not only when a pane closes.
func (w *world) sendTo(rng *rand.Rand, hold bool) string {
	var names []string
	for _, m := range w.fd.mgr.Members() {
		if !*flagRunningOnly || (m.Status.Phase == v1alpha1.PhaseReady && m.Status.PaneID != "") {
			names = append(names, m.Name)
		}
	}
	name, ok := pick(rng, names)
	if !ok {
		return "send: no running members"
	}
	return w.send(name, hold)
}

var workerActions = []string{"reply", "reply", "reply", "silent", "silent", "block", "crash"}

func (w *world) actWorker(rng *rand.Rand) string {
	ps := w.pendingSorted()
	if len(ps) == 0 {
		return "workers: nothing pending"
	}
	p := ps[rng.IntN(len(ps))]
	what, done := w.workerAct(p, workerActions[rng.IntN(len(workerActions))])
	if done {
		w.finish(p)
	}
	return what
}

// actBreathe lets fleetd work for a moment: until the fleet converges or a
// few milliseconds pass. It paces the schedule and decides nothing.
func (w *world) actBreathe(rng *rand.Rand) string {
	d := time.Duration(1+rng.IntN(20)) * time.Millisecond
	if w.fd == nil {
		tm := time.NewTimer(d)
		<-tm.C
		return fmt.Sprintf("breathe %s (fleetd down)", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := w.fd.mgr.WaitFor(ctx, func(ms []v1alpha1.Member) bool { return w.converged(ms) == "" })
	return fmt.Sprintf("breathe up to %s: converged=%v", d, err == nil)
}

func (w *world) memberPane(rng *rand.Rand) (string, string, bool) {
	name, ok := pick(rng, w.present())
	if !ok {
		return "", "", false
	}
	p, ok := w.agentPane(name)
	return name, p.ID, ok
}

func (w *world) actKillPane(rng *rand.Rand) string {
	name, pane, ok := w.memberPane(rng)
	if !ok {
		return "kill pane: " + name + " has none"
	}
	w.lostAgent(name)
	_ = w.fake.KillPane(pane)
	return fmt.Sprintf("kill %s's pane %s", name, pane)
}

func (w *world) actExitAgent(rng *rand.Rand) string {
	name, pane, ok := w.memberPane(rng)
	if !ok {
		return "exit agent: " + name + " has none"
	}
	w.lostAgent(name)
	_ = w.fake.ExitAgent(pane)
	return fmt.Sprintf("%s's agent exits to the shell in %s", name, pane)
}

func (w *world) actBlockAgent(rng *rand.Rand) string {
	name, ok := pick(rng, w.present())
	p, has := w.agentPane(name)
	if !ok || !has {
		return "block agent: " + name + " has none"
	}
	pane := p.ID
	if p.Status != "working" && !*flagIdleDialog {
		return fmt.Sprintf("block agent: %s's agent is %s: only a working agent stops at a dialog (-chaos.idledialog)", name, p.Status)
	}
	_ = w.fake.SetAgentState(pane, "blocked")
	return fmt.Sprintf("%s's agent blocks at a dialog in %s", name, pane)
}

func (w *world) actHerdr(*rand.Rand) string {
	if w.herdrDown {
		w.herdrUp()
		w.herdrDown = false
		return "herdr restarts"
	}
	if err := w.fake.Stop(); err != nil {
		w.t.Fatalf("herdr stop: %v", err)
	}
	w.herdrDown = true
	return "herdr stops"
}

func (w *world) actKillFleetd(*rand.Rand) string {
	if w.fd == nil {
		w.startFleetd()
		return "start fleetd (adopts what the last one left)"
	}
	w.killFleetd()
	return "kill -9 fleetd"
}

func (w *world) actAdd(rng *rand.Rand) string {
	var absent []string
	for _, n := range pool {
		if _, ok := w.desired[n]; !ok {
			absent = append(absent, n)
		}
	}
	name, ok := pick(rng, absent)
	if !ok {
		return "add: pool exhausted"
	}
	w.setMember(name, spec{})
	return "add member " + name
}

func (w *world) actDelete(rng *rand.Rand) string {
	name, ok := pick(rng, w.present())
	if !ok {
		return "delete: no members"
	}
	w.deleteMember(name)
	return "delete member " + name
}

func (w *world) actEdit(rng *rand.Rand) string {
	name, ok := pick(rng, w.present())
	if !ok {
		return "edit: no members"
	}
	s := w.desired[name]
	if rng.IntN(2) == 0 {
		w.nextCwd++
		s.cwd = fmt.Sprintf("/srv/chaos/%d", w.nextCwd)
	} else if s.workspace == "" {
		s.workspace = "chaos-b"
	} else {
		s.workspace = ""
	}
	w.setMember(name, s)
	return fmt.Sprintf("edit member %s: workspace %q cwd %q", name, s.workspace, s.cwd)
}

func (w *world) actPause(rng *rand.Rand) string {
	name, ok := pick(rng, w.present())
	if !ok {
		return "pause: no members"
	}
	s := w.desired[name]
	s.paused = !s.paused
	w.setMember(name, s)
	return fmt.Sprintf("member %s paused=%v", name, s.paused)
}

// settle brings herdr and fleetd back, lets the workers finish every
// prompt (replying or not; no more faults) and unblocks idle dialogs, until
// the fleet converges, herdr matches it and no message is in flight.
func (w *world) settle(rng *rand.Rand) {
	w.dropSlowClient("the schedule ended")
	w.dropHostile("the schedule ended")
	if w.herdrDown {
		w.record("settle: " + w.actHerdr(rng))
	}
	if w.fd == nil {
		w.startFleetd()
		w.record("settle: start fleetd")
	}
	deadline := time.Now().Add(settleTimeout)
	for {
		ch := w.fd.mgr.Changed()
		w.mu.Lock()
		sig := w.signal
		w.mu.Unlock()
		for _, p := range w.pendingSorted() {
			what, done := w.workerAct(p, []string{"reply", "silent"}[rng.IntN(2)])
			if done {
				w.finish(p)
			}
			w.record("settle: " + what)
		}
		w.unblockIdle()
		w.poll()
		w.noteUncertain()
		why := w.converged(w.fd.mgr.Members())
		if why == "" {
			why = w.herdrMatches()
		}
		if why == "" {
			why = w.messagesQuiet()
		}
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("no convergence within %s: %s\n%s", settleTimeout, why, w.dump())
		}
		tm := time.NewTimer(2 * time.Millisecond) // fallback: herdr-side changes have no signal
		select {
		case <-ch:
		case <-sig:
		case <-tm.C:
		}
		tm.Stop()
	}
}

// unblockIdle answers the dialog of every blocked agent that has no
// pending prompt of its own.
func (w *world) unblockIdle() {
	busy := map[string]bool{}
	for _, p := range w.pendingSorted() {
		busy[p.pane] = true
	}
	for _, p := range w.fake.Panes() {
		if p.AgentName != "" && p.Status == "blocked" && !busy[p.ID] {
			_ = w.fake.SetAgentState(p.ID, "idle")
			w.record(fmt.Sprintf("settle: %s's dialog answered", p.AgentName))
		}
	}
}

// converged says why the members do not match the manifests yet ("" when
// they do): every member with a manifest is listed with that spec, running
// (Ready at its generation) or Paused; no other member is listed.
func (w *world) converged(ms []v1alpha1.Member) string {
	got := map[string]v1alpha1.Member{}
	for _, m := range ms {
		got[m.Name] = m
		if _, ok := w.desired[m.Name]; !ok {
			return m.Name + " is deleted but still listed"
		}
	}
	for _, name := range w.present() {
		want := w.desired[name]
		m, ok := got[name]
		switch {
		case !ok:
			return name + " is not listed"
		case m.Spec.Paused != want.paused || m.Spec.Cwd != want.cwd || m.Spec.Workspace != cmpOr(want.workspace, v1alpha1.DefaultWorkspace):
			return name + "'s manifest is not read yet"
		case want.paused && m.Status.Phase != v1alpha1.PhasePaused:
			return fmt.Sprintf("%s is %s, want Paused", name, m.Status.Phase)
		case !want.paused && (m.Status.Phase != v1alpha1.PhaseReady || m.Status.ObservedGeneration != m.Generation || m.Status.PaneID == ""):
			return fmt.Sprintf("%s is %s at generation %d/%d (pane %q), want Ready", name, m.Status.Phase,
				m.Status.ObservedGeneration, m.Generation, m.Status.PaneID)
		case !want.paused && upToDate(m) != "":
			return name + " runs an older definition: " + upToDate(m)
		}
	}
	return ""
}

// upToDate says why m's agent does not run its current definition, its
// profile's included ("" when it does).
func upToDate(m v1alpha1.Member) string {
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.ConditionUpToDate && c.Status != v1alpha1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// herdrMatches says why herdr does not match the fleet ("" when it does):
// one fleetd tab per running member, holding one pane that runs the
// member's agent, the one its status names; no fleetd tab for any other
// name (no orphans); no agent of a member outside its tab (no duplicates).
func (w *world) herdrMatches() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wss, err := w.client.ListWorkspaces(ctx)
	if err != nil {
		return "herdr: " + err.Error()
	}
	tabs := map[string][]string{} // member → its labelled tabs
	for _, ws := range wss {
		ts, err := w.client.ListTabs(ctx, ws.WorkspaceID)
		if err != nil {
			return "herdr: " + err.Error()
		}
		for _, t := range ts {
			if name, ok := strings.CutPrefix(t.Label, controllers.TabLabelPrefix); ok {
				tabs[name] = append(tabs[name], t.TabID)
			}
		}
	}
	panesIn := map[string]int{}
	agents := map[string][]string{}
	for _, p := range w.fake.Panes() {
		panesIn[p.TabID]++
		if p.AgentName != "" {
			agents[p.AgentName] = append(agents[p.AgentName], p.ID)
		}
	}
	for name, ids := range tabs {
		if s, ok := w.desired[name]; !ok || s.paused {
			return fmt.Sprintf("orphan fleetd tab(s) %v for %s", ids, name)
		}
	}
	for _, name := range w.present() {
		if w.desired[name].paused {
			if len(agents[name]) > 0 {
				return fmt.Sprintf("paused %s still runs in %v", name, agents[name])
			}
			continue
		}
		m, _ := w.fd.mgr.Member(name)
		switch {
		case len(tabs[name]) != 1:
			return fmt.Sprintf("%s has fleetd tabs %v, want one", name, tabs[name])
		case tabs[name][0] != m.Status.TabID:
			return fmt.Sprintf("%s's tab is %s but its status says %s", name, tabs[name][0], m.Status.TabID)
		case panesIn[m.Status.TabID] != 1:
			return fmt.Sprintf("%s's tab %s holds %d panes", name, m.Status.TabID, panesIn[m.Status.TabID])
		case len(agents[name]) != 1 || agents[name][0] != m.Status.PaneID:
			return fmt.Sprintf("%s's agent runs in %v, its status says %s", name, agents[name], m.Status.PaneID)
		}
	}
	for name, ps := range agents {
		if _, ok := w.desired[name]; !ok {
			return fmt.Sprintf("deleted %s still runs in %v", name, ps)
		}
	}
	return ""
}

// messagesQuiet says why messages are still moving ("" when none is):
// nothing queued or being typed, no prompt left with a worker, the
// primary's mailbox read, and every open turn one whose delivery fleetd
// reported uncertain (its prompt may never have been typed).
func (w *world) messagesQuiet() string {
	w.mu.Lock()
	pending := len(w.pending)
	w.mu.Unlock()
	if pending > 0 {
		return fmt.Sprintf("%d prompts with workers", pending)
	}
	core := w.fd.core
	open := map[string]bool{}
	for _, name := range pool {
		for _, ot := range core.Status(name).OpenTurns {
			open[ot.ID] = true
		}
	}
	w.mu.Lock()
	for turn := range w.holding {
		if !open[turn] {
			w.mu.Unlock()
			return "the held call on ended turn " + turn + " has not returned yet"
		}
	}
	w.mu.Unlock()
	if n := core.Pending(primary); n > 0 {
		return fmt.Sprintf("%d messages in the primary's mailbox", n)
	}
	for _, name := range pool {
		st := core.Status(name)
		if st.QueueDepth > 0 || st.Delivering != "" {
			return fmt.Sprintf("%s: %d queued, delivering %q (agent %s, gone %v)", name, st.QueueDepth, st.Delivering, st.AgentStatus, st.Gone)
		}
		for _, ot := range st.OpenTurns {
			w.mu.Lock()
			s := w.ledger[ot.ID]
			w.mu.Unlock()
			if s == nil || !s.uncertain {
				return fmt.Sprintf("turn %s to %s is open (delivered %v, agent %s seq %d)", ot.ID, name, ot.Delivered, st.AgentStatus, st.StateChangeSeq)
			}
		}
	}
	return ""
}

// check asserts the message invariants once everything has settled (the
// herdr ones, no duplicate or orphan pane, hold already: settle waited for
// herdrMatches).
func (w *world) check() {
	w.sampleHeap("at the end")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkFaults()
	w.checkMidTurns()
	for _, p := range w.problems {
		w.t.Error(p)
	}
	var turns []string
	for id := range w.ledger {
		turns = append(turns, id)
	}
	sort.Strings(turns)
	counts := map[string]int{}
	for _, id := range turns {
		s := w.ledger[id]
		switch {
		case len(s.outcomes) > 1:
			w.t.Errorf("message %s (turn %s to %s) ended more than once: %v", s.text, s.turn, s.worker, s.outcomes)
		case len(s.outcomes) == 0 && !s.uncertain:
			w.t.Errorf("message %s (turn %s to %s) was lost: no reply, no mail, not reported uncertain", s.text, s.turn, s.worker)
		case len(s.outcomes) == 0:
			counts["uncertain"]++
		default:
			counts[s.outcomes[0]]++
		}
		if n := w.typed[s.text]; n > 1 {
			w.t.Errorf("message %s was typed into panes %d times", s.text, n)
		}
	}
	w.record(fmt.Sprintf("messages: %d sent, outcomes %v, %d stray replies", len(turns), counts, w.strays))
	w.t.Logf("%d messages sent; outcomes %v; %d stray replies", len(turns), counts, w.strays)
}

// dump describes the state for a failure message.
func (w *world) dump() string {
	var b strings.Builder
	if w.fd != nil {
		for _, m := range w.fd.mgr.Members() {
			fmt.Fprintf(&b, "  member %s: phase=%s gen=%d/%d pane=%s tab=%s restarts=%d lastError=%q\n", m.Name, m.Status.Phase,
				m.Status.ObservedGeneration, m.Generation, m.Status.PaneID, m.Status.TabID, m.Status.Restarts, m.Status.LastError)
			evs := w.fd.mgr.MemberEvents(m.Name)
			for _, ev := range evs[max(0, len(evs)-4):] {
				fmt.Fprintf(&b, "    event %s %s: %s\n", ev.Type, ev.Reason, ev.Message)
			}
		}
		for _, name := range pool {
			st := w.fd.core.Status(name)
			fmt.Fprintf(&b, "  worker %s: %+v\n", name, st)
		}
	}
	for _, p := range w.fake.Panes() {
		fmt.Fprintf(&b, "  pane %s tab %s agent %q status %s prompts %v\n", p.ID, p.TabID, p.AgentName, p.Status, p.Prompts)
	}
	for _, p := range w.pendingSorted() {
		fmt.Fprintf(&b, "  pending %s in %s blocked=%v\n", p.text, p.pane, p.blocked)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.problems {
		fmt.Fprintf(&b, "  problem: %s\n", p)
	}
	var turns []string
	for id := range w.ledger {
		turns = append(turns, id)
	}
	sort.Strings(turns)
	for _, id := range turns {
		s := w.ledger[id]
		fmt.Fprintf(&b, "  message %s turn %s to %s: outcomes %v uncertain %v typed %d\n", s.text, id, s.worker, s.outcomes, s.uncertain, w.typed[s.text])
	}
	return b.String()
}

// checkGoroutines fails t, listing the survivors, if a goroutine the run
// started (one not ignored by before) is still running. The run's goroutines
// end asynchronously after their owners stopped, and goleak.Find retries for
// only about half a second, which a loaded -race run can exceed; so Find is
// asked again until leakTimeout has passed.
func checkGoroutines(t *testing.T, before goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(leakTimeout)
	for {
		err := goleak.Find(before)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Error(err)
			return
		}
	}
}
