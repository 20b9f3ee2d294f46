package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/messaging/herdrprompt"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store/dirstore"
	"github.com/fleetd-dev/fleetd/mcp"
)

// primary is the caller every message is sent from: the primary's name in
// the messaging core, as the MCP gateway names it, so that the primary's
// MCP sessions (see gateway_test.go) read the same mailbox.
const primary = mcp.PrimaryName

// The chaos fleet's bounds: small, so that a flood reaches them within a
// few steps and the heap bound checked at the end (see heapBound) is tight.
const (
	maxContent      = 16 << 10
	maxMailboxMsgs  = 24
	maxMailboxBytes = 128 << 10
	maxPollBytes    = 32 << 10
	toolCallBurst   = 16
	toolCallRate    = 200.0 // per second
)

const profileYAML = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: sim}
spec:
  harness: codex
  args: ["-m", "sim"]
  startupTimeout: 10s
`

// spec is what the schedule last wrote for a member; a member without one
// has no manifest.
type spec struct {
	workspace string
	cwd       string
	paused    bool
}

func (s spec) yaml(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: %s}\nspec:\n  profile: sim\n", name)
	if s.workspace != "" {
		fmt.Fprintf(&b, "  workspace: %s\n", s.workspace)
	}
	if s.cwd != "" {
		fmt.Fprintf(&b, "  cwd: %s\n", s.cwd)
	}
	if s.paused {
		b.WriteString("  paused: true\n")
	}
	return b.String()
}

// fleetd is one running fleetd process, wired as the daemon wires it: the
// member controller reports agent statuses and gone panes to the messaging
// core, which types prompts through its own herdr client.
type fleetd struct {
	mgr    *controllers.Manager
	core   *messaging.Core
	db     *statedb.DB // its state database
	cancel context.CancelFunc
	done   chan error
	gone   chan struct{} // closed when the gone-member reporter returned
	gw     *gateway      // its MCP gateway
}

// sent is one message the primary sent, and everything it learnt about it.
type sent struct {
	turn, worker, text string
	// outcomes are the final results the primary received for the turn:
	// from a held call or from its mailbox. Exactly one is expected, or
	// none when the delivery was reported uncertain.
	outcomes  []string
	uncertain bool
}

// pendingPrompt is a prompt typed into a worker's pane that the simulated
// worker has not finished yet.
type pendingPrompt struct {
	pane, text string
	blocked    bool
	// done: the worker has finished it (replied, or finished silently)
	// and is about to go idle; set under world.mu before the agent's idle
	// status, which lets fleetd close the tab, so that checkClose never
	// counts a finished prompt that finish has not removed yet.
	done bool
}

// world is one chaos run: the fake herdr, the manifests and state
// directories, the current fleetd (nil while it is down), the simulated
// workers and the primary's ledger.
type world struct {
	t         *testing.T
	seed      int64
	start     time.Time // when the run began
	log       *slog.Logger
	manifests string
	state     string
	fake      *herdrsim.Server
	client    *herdr.Client // the test's own view of herdr
	herdrDown bool
	fd        *fleetd
	desired   map[string]spec
	trace     []string
	nextMsg   int
	nextCwd   int
	slow      *slowClient // the slow MCP client, while there is one
	hostile   *hostile    // the hostile clients, while they are on (hostile_test.go)

	// The heap in use after the initial fleet converged, and its peak
	// since (after floods and at the end).
	heapBase, heapPeak uint64
	heapPeakAt         string

	ctx    context.Context // ends at teardown; bounds the held calls
	cancel context.CancelFunc
	held   sync.WaitGroup // goroutines holding Await calls

	mu       sync.Mutex // guards the fields below
	pending  []*pendingPrompt
	typed    map[string]int // prompt text → times typed into a pane
	signal   chan struct{}  // closed and replaced when a prompt is typed
	ledger   map[string]*sent
	byText   map[string]*sent
	seenMail map[string]bool
	holding  map[string]bool // turns with a held call that has not returned
	strays   int
	problems []string

	floods    map[string]*floodMsg // flood key → what became of it
	nextFlood int

	// The profile's version (rollout_test.go), and the turns its workers
	// were in the middle of when it changed, which must end with their
	// answer.
	nextProfile int
	midTurn     map[string]bool
	// lostTurns are the turns whose worker's agent the schedule took away
	// (rollout_test.go): a profile change after that is not in their middle.
	lostTurns map[string]bool
}

func newWorld(t *testing.T, seed int64) *world {
	t.Helper()
	root := t.TempDir()
	w := &world{
		t: t, seed: seed, start: time.Now(), log: testLogger(),
		manifests: filepath.Join(root, "manifests"), state: filepath.Join(root, "state"),
		desired: map[string]spec{}, typed: map[string]int{}, signal: make(chan struct{}),
		ledger: map[string]*sent{}, byText: map[string]*sent{}, seenMail: map[string]bool{}, holding: map[string]bool{},
		floods: map[string]*floodMsg{}, midTurn: map[string]bool{}, lostTurns: map[string]bool{},
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	if err := os.MkdirAll(w.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	w.writeFile("profile.yaml", profileYAML)
	// herdr's schema checks every request, and every tab.close is looked
	// at before herdr serves it: no busy agent may be closed
	// (rollout_test.go).
	fake, err := validated.Start(&herdrsim.Options{Behavior: herdrsim.Behavior{OnPrompt: w.onPrompt},
		Validator: closeWatch{Validator: validated.Schema(), w: w}})
	if err != nil {
		t.Fatal(err)
	}
	w.fake = fake
	w.client = herdr.New(&herdr.Options{SocketPath: fake.SocketPath()})
	return w
}

func testLogger() *slog.Logger {
	if os.Getenv("FLEETD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// writeFile replaces a manifest atomically, as an editor saving it would.
func (w *world) writeFile(name, content string) {
	w.t.Helper()
	tmp := filepath.Join(w.manifests, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(w.manifests, name)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) setMember(name string, s spec) {
	w.desired[name] = s
	w.writeFile(name+".yaml", s.yaml(name))
}

func (w *world) deleteMember(name string) {
	delete(w.desired, name)
	if err := os.Remove(filepath.Join(w.manifests, name+".yaml")); err != nil {
		w.t.Fatal(err)
	}
}

// startFleetd starts a fresh fleetd on the state directory, which must
// adopt whatever the previous one left running.
func (w *world) startFleetd() {
	w.t.Helper()
	hc := herdr.New(&herdr.Options{SocketPath: w.fake.SocketPath()})
	st, err := dirstore.New(w.manifests, &dirstore.Options{StateDir: w.state, Debounce: 2 * time.Millisecond,
		RetryInterval: 20 * time.Millisecond, Logger: w.log})
	if err != nil {
		w.t.Fatalf("store: %v", err)
	}
	db, err := statedb.Open(statedir.At(w.state).StateDB(), nil)
	if err != nil {
		w.t.Fatalf("state database: %v", err)
	}
	prompter := herdrprompt.New(hc)
	var mgr *controllers.Manager // the roster asks it which panes still close
	roster := daemon.Roster(st, func(member string) bool { return mgr != nil && mgr.RunsPane(member) })
	core, err := messaging.New(statedir.At(w.state).Messages(), prompter, &messaging.Options{
		// PickupGrace must outlast the way of a status event from herdr
		// through the controller on a loaded machine: a shorter one lets a
		// second prompt into a turn (and a reply to the wrong turn) before
		// the pickup is seen.
		Logger: w.log, PickupGrace: 3 * time.Second, PromptTimeout: 2 * time.Second, DefaultTimeout: time.Hour,
		Admit:           messaging.AdmitMembers(roster),
		PrimaryName:     primary,
		MaxContentBytes: maxContent, MaxMailboxMessages: maxMailboxMsgs, MaxMailboxBytes: maxMailboxBytes,
		MaxPollBytes: maxPollBytes,
	})
	if err != nil {
		db.Close()
		w.t.Fatalf("messaging core: %v", err)
	}
	mgr, err = controllers.New(&controllers.Options{
		Store: st, State: db, Herdr: hc, Registerer: prometheus.NewRegistry(), Logger: w.log, Activity: core,
		OnPaneGone:    func(member, _, reason string) { core.WorkerGone(member, reason) },
		OnAgentStatus: core.ObserveStatus,
		OnAgentRelaunched: func(member, paneID string) {
			core.AgentRelaunched(member, "herdr restarted with session restore and relaunched it in pane "+paneID)
		},
		Workers: 4, PollInterval: 2 * time.Millisecond, CallTimeout: 2 * time.Second,
		ReconnectBackoff: 5 * time.Millisecond, MaxReconnect: 50 * time.Millisecond,
		ResubscribeDelay: 5 * time.Millisecond, RestartBackoff: 5 * time.Millisecond,
		MaxRestartDelay: 50 * time.Millisecond, StableAfter: 50 * time.Millisecond,
		QueueBaseDelay: time.Millisecond, QueueMaxDelay: 50 * time.Millisecond,
	})
	if err != nil {
		core.Close()
		db.Close()
		w.t.Fatalf("controllers: %v", err)
	}
	prompter.HoldWhile(func() bool { return !mgr.HerdrSynced() }) // as the daemon wires it
	ctx, cancel := context.WithCancel(context.Background())
	fd := &fleetd{mgr: mgr, core: core, db: db, cancel: cancel, done: make(chan error, 1), gone: make(chan struct{})}
	fd.gw = w.startGateway(mgr, core)
	go func() { fd.done <- mgr.Run(ctx) }()
	go func() {
		defer close(fd.gone)
		messaging.ReportGoneMembers(ctx, roster, core)
	}()
	w.fd = fd
}

// killFleetd stops fleetd the way kill -9 would leave things: no cleanup
// of panes, tabs or ownership records (Run does none; calls in flight are
// cut by the cancelled context), no journal records for prompts in flight
// (Close discards their outcomes), held calls cut off. What is on disk is
// what the process had made durable, as after a crash.
//
// The core closes only once Run has returned: in process the controller
// would otherwise go on reconciling after the core closed, a window far
// wider than a real crash's. (A crash between the controller dropping a
// closed pane's record and reporting the worker gone is covered after the
// restart: the daemon reports gone every busy worker that is no longer a
// running member.)
func (w *world) killFleetd() {
	w.t.Helper()
	fd := w.fd
	w.fd = nil
	w.dropSlowClient("fleetd was killed")
	w.dropHostile("fleetd was killed")
	fd.cancel()
	if err := <-fd.done; err != nil {
		w.t.Errorf("controllers Run: %v", err)
	}
	<-fd.gone
	if err := fd.core.Close(); err != nil {
		w.t.Errorf("messaging core close: %v", err)
	}
	if err := fd.db.Close(); err != nil {
		w.t.Errorf("state database close: %v", err)
	}
	// As the daemon shuts down: the core first, which ends the calls the
	// gateway holds (the SDK does not cancel a held call when its client
	// goes, and a session's close waits for its calls), then the listener.
	fd.gw.close(w.t)
}

// onPrompt is every simulated worker's reaction to a prompt typed into its
// pane: note it for the schedule and pick it up (working), as an agent does.
func (w *world) onPrompt(paneID, text string) {
	// The agent is working before the prompt is anyone's to act on: a
	// worker that replied (and went idle) before this status change would
	// be put back to working afterwards, for good, and fleetd would see a
	// turn start after its reply.
	_ = w.fake.SetAgentState(paneID, "working") // the pane may be gone already
	w.mu.Lock()
	w.typed[text]++
	w.pending = append(w.pending, &pendingPrompt{pane: paneID, text: text})
	close(w.signal)
	w.signal = make(chan struct{})
	w.mu.Unlock()
}

func (w *world) problem(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, fmt.Sprintf(format, args...))
}

// send is the primary's bridge_send of a new message to worker; with hold
// it also holds a call on the turn (bridge_send with wait, resumable).
func (w *world) send(worker string, hold bool) string {
	w.nextMsg++
	text := fmt.Sprintf("task-%d-%d", w.seed, w.nextMsg)
	res, err := w.fd.core.Send(w.ctx, messaging.SendRequest{From: primary, To: worker, Content: text})
	if err != nil {
		return fmt.Sprintf("send %s to %s refused: %s", text, worker, messaging.CodeOf(err))
	}
	s := &sent{turn: res.TurnID, worker: worker, text: text}
	w.mu.Lock()
	w.ledger[s.turn] = s
	w.byText[text] = s
	w.mu.Unlock()
	if !hold {
		return fmt.Sprintf("send %s to %s: turn %s", text, worker, s.turn)
	}
	core := w.fd.core
	w.mu.Lock()
	w.holding[s.turn] = true
	w.mu.Unlock()
	w.held.Add(1)
	go func() {
		defer w.held.Done()
		defer func() {
			w.mu.Lock()
			delete(w.holding, s.turn)
			w.mu.Unlock()
		}()
		res, err := core.Await(w.ctx, primary, s.turn)
		switch {
		case err == nil && res.Outcome == messaging.OutcomeReply:
			w.outcome(s, "held reply", res.Text)
		case err == nil && res.Outcome == messaging.OutcomeTurnDone:
			w.outcome(s, "held turn_done", "")
		case err == nil:
			w.problem("held call on %s (%s) ended with outcome %s", s.turn, s.text, res.Outcome)
		case messaging.CodeOf(err) == messaging.CodeWorkerGone, messaging.CodeOf(err) == messaging.CodeDeliveryFailed:
			w.outcome(s, "held "+string(messaging.CodeOf(err)), "")
		}
		// Otherwise the call was cut (fleetd died) or the turn had already
		// ended: the outcome is in the mailbox.
	}()
	return fmt.Sprintf("send %s to %s and hold: turn %s", text, worker, s.turn)
}

// outcome records a final result for s; a reply must answer s's prompt.
func (w *world) outcome(s *sent, what, replyText string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s.outcomes = append(s.outcomes, what)
	if strings.HasSuffix(what, "reply") && replyText != "re: "+s.text {
		w.problems = append(w.problems, fmt.Sprintf("turn %s (%s) got reply %q", s.turn, s.text, replyText))
	}
}

// poll is the primary's bridge_poll + bridge_ack, a page at a time (the
// cursor of one page starts the next) until the mailbox holds nothing
// more. Messages are returned until acknowledged, so one seen before a
// crash can come again: the primary deduplicates by message id, as the
// at-least-once contract asks. Within one pass no message may come twice
// and no page may go over the page bound (but for a single message).
func (w *world) poll() string {
	core := w.fd.core
	var ids []string
	fresh, pages := 0, 0
	inPass := map[string]bool{}
	cursor := ""
	for {
		page, err := core.PollPage(w.ctx, primary, messaging.PollRequest{Cursor: cursor, Limit: 8})
		if err != nil {
			return "poll failed: " + err.Error()
		}
		pages++
		size := 0
		for _, m := range page.Messages {
			size += len(m.Content)
			if inPass[m.ID] {
				w.problem("poll: message %s came twice in one paged pass", m.ID)
			}
			inPass[m.ID] = true
			ids = append(ids, m.ID)
			if w.mail(m) {
				fresh++
			}
		}
		if len(page.Messages) > 1 && size > maxPollBytes {
			w.problem("poll: a page of %d messages holds %d bytes, over the %d-byte page bound", len(page.Messages), size, maxPollBytes)
		}
		if page.More == 0 || len(page.Messages) == 0 {
			break
		}
		cursor = page.Next
	}
	if len(ids) > 0 {
		if _, err := core.Ack(primary, ids); err != nil {
			return fmt.Sprintf("poll: %d messages (%d new) in %d pages, ack failed: %v", len(ids), fresh, pages, err)
		}
	}
	return fmt.Sprintf("poll: %d messages (%d new) in %d pages", len(ids), fresh, pages)
}

// mail handles one message from the primary's mailbox; it reports whether
// the message was new.
func (w *world) mail(m messaging.Message) bool {
	w.mu.Lock()
	seen := w.seenMail[m.ID]
	w.seenMail[m.ID] = true
	s := w.ledger[m.TurnID]
	w.mu.Unlock()
	if seen {
		return false
	}
	if w.floodMail(m) {
		return true
	}
	switch m.Kind {
	case messaging.KindReply, messaging.KindTurnDone, messaging.KindWorkerGone, messaging.KindDeliveryFailed:
	default:
		return true // progress and questions end nothing
	}
	switch {
	case s != nil:
		w.outcome(s, "mail "+string(m.Kind), m.Content)
	case m.TurnID == "":
		w.mu.Lock()
		w.strays++ // a worker replied after its turn ended (e.g. its pane went meanwhile)
		w.mu.Unlock()
	default:
		w.problem("mail %s (%s) for unknown turn %s", m.ID, m.Kind, m.TurnID)
	}
	return true
}

// noteUncertain records the deliveries fleetd reports as uncertain
// (bridge_status), as the primary would read them.
func (w *world) noteUncertain() {
	if w.fd == nil {
		return
	}
	for _, name := range pool {
		for _, d := range w.fd.core.Status(name).Uncertain {
			w.mu.Lock()
			if s := w.ledger[d.TurnID]; s != nil {
				s.uncertain = true
			}
			w.mu.Unlock()
		}
	}
}

// workerAct makes the worker owning p do one thing: reply (bridge_reply,
// then idle), finish without replying, stop at a dialog, or crash. A worker
// whose pane or agent is gone is dead and forgets the prompt. It reports
// whether p is finished.
func (w *world) workerAct(p *pendingPrompt, action string) (string, bool) {
	pane, ok := w.fake.Pane(p.pane)
	if !ok || pane.AgentName == "" {
		return fmt.Sprintf("worker in %s is gone; %s is forgotten", p.pane, p.text), true
	}
	name := pane.AgentName
	if p.blocked && action != "crash" {
		if err := w.fake.SetAgentState(p.pane, "working"); err != nil {
			return fmt.Sprintf("worker %s lost while unblocking: %v", name, err), true
		}
		p.blocked = false
	}
	switch action {
	case "reply":
		if w.fd == nil {
			return fmt.Sprintf("%s cannot reply to %s: fleetd is down", name, p.text), false
		}
		res, err := w.fd.core.Reply(w.ctx, name, "re: "+p.text, true)
		if err != nil {
			return fmt.Sprintf("%s reply to %s failed (%s); will retry", name, p.text, messaging.CodeOf(err)), false
		}
		w.mu.Lock()
		s := w.byText[p.text]
		w.mu.Unlock()
		if res.TurnID != "" && (s == nil || s.turn != res.TurnID) {
			w.problem("%s's reply to %s was given to turn %s", name, p.text, res.TurnID)
		}
		w.done(p)
		_ = w.fake.SetAgentState(p.pane, "idle")
		return fmt.Sprintf("%s replies to %s: %s turn %q", name, p.text, res.Mode, res.TurnID), true
	case "silent":
		// A turn ends without a reply only once fleetd has seen the agent
		// working on it; an agent that starts and finishes while fleetd
		// cannot see it leaves the turn open for good (see the package
		// doc), so the worker finishes silently only after that, unless
		// -chaos.unobserved.
		if !*flagUnobserved && (w.fd == nil || w.fd.core.Status(name).AgentStatus != messaging.StatusWorking) {
			return fmt.Sprintf("%s waits for fleetd to see it working on %s", name, p.text), false
		}
		_ = w.fake.WriteOutput(p.pane, "finished "+p.text+" without a word")
		w.done(p)
		_ = w.fake.SetAgentState(p.pane, "idle")
		return fmt.Sprintf("%s finishes %s silently", name, p.text), true
	case "block":
		_ = w.fake.SetAgentState(p.pane, "blocked")
		p.blocked = true
		return fmt.Sprintf("%s blocks on a dialog while on %s", name, p.text), false
	case "crash":
		w.lostAgent(name)
		_ = w.fake.KillPane(p.pane)
		return fmt.Sprintf("%s crashes (pane %s) while on %s", name, p.pane, p.text), true
	}
	panic("unknown worker action " + action)
}

// pendingSorted returns the pending prompts in a stable order.
func (w *world) pendingSorted() []*pendingPrompt {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := slices.Clone(w.pending)
	sort.Slice(out, func(i, j int) bool { return out[i].text < out[j].text })
	return out
}

// done marks p as finished by its worker, before the worker goes idle.
func (w *world) done(p *pendingPrompt) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p.done = true
}

func (w *world) finish(p *pendingPrompt) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = slices.DeleteFunc(w.pending, func(q *pendingPrompt) bool { return q == p })
}

// agentPane returns the live pane running member name's agent.
func (w *world) agentPane(name string) (herdrsim.PaneState, bool) {
	for _, p := range w.fake.Panes() {
		if p.AgentName == name {
			return p, true
		}
	}
	return herdrsim.PaneState{}, false
}

// teardown stops everything the run started; the leak check
// (goleak.VerifyNone) runs after it.
func (w *world) teardown() {
	if w.fd != nil {
		w.killFleetd()
	}
	w.cancel()
	w.held.Wait()
	if err := w.fake.Close(); err != nil {
		w.t.Errorf("fake herdr close: %v", err)
	}
}
