// Package chaos holds fleetd's seeded chaos test: a random but reproducible
// schedule of faults played against a running fleetd (the member controller
// and the messaging core, wired as the daemon wires them) over the fake
// herdr of package herdrsim, with simulated workers that answer the
// prompts typed into their panes.
//
// The schedule sends messages, lets workers reply, finish silently, block or
// crash, kills panes and agents, stops and restarts herdr, kills fleetd
// without cleanup and starts a fresh one on the same state directory,
// adds, edits, pauses and deletes manifests, and changes the members'
// Profile in the middle of their turns (issue 21, rollout_test.go), which
// rolls out to them. It also plays issue 12's
// faults (faults_test.go, gateway_test.go): herdr refusing connections for
// a few milliseconds or dropping the next few requests unanswered; herdr
// restarting at once with its agents dying (each pane back under its id,
// without its agent); a slow MCP client on the primary's session that
// sends its held bridge_poll in halves and reads the answer at a trickle
// (or holds it for good) while another session must be served within
// seconds, and that deletes its session when it hangs up; a primary's MCP
// client that holds a bridge_send and goes away (connection closed,
// session deleted), whose message must still end in the mailbox; and a
// flood from one worker, progress notes far over the tool-
// call rate (through the MCP gateway) and the mailbox bounds (straight into
// the core). It also plays issue 24's slow-client fault (hostile_test.go):
// more request bodies sent a byte at a time than the listener has
// connections (without a token and with a worker's, renewed as the
// listener closes them), one worker token holding twice as many waits
// (GET /inbox?wait=true) as there are connections, and member watches
// whose readers never read; from the step that starts them to the one that
// ends them, /healthz, the primary's GET /inbox and bridge_status on a new
// session must each answer within a second, measured with the real clock
// (the whole system's behaviour; nothing waits for it). The chaos fleet
// serves package mcp's gateway through the daemon's bounded listener
// (internal/listener, capped at 64 connections, and the held-call quota it
// implies) with small bounds: 24 messages and 128 KiB per mailbox, 32 KiB
// pages, 16 KiB contents, 16 tool calls per burst.
//
// All along, every tab fleetd closes is looked at before herdr closes it:
// no agent in it may be working, blocked at a dialog or on a prompt its
// worker has not finished (the schedule forces no close and no wait ends
// by its deadline).
//
// When it ends the test lets everything settle (condition-based, never by
// sleeping) and checks the invariants: every member converged to its spec,
// its profile's included (the rollout done);
// one fleetd tab per running member holding one pane and none for any
// other name (no duplicate pane, no orphan); every message sent ended
// exactly once (replied, polled from the mailbox or reported uncertain;
// none lost, none doubled, none typed twice, no reply given to the wrong
// turn); every turn a worker was in the middle of when the profile
// changed ended with its answer (a reply, or turn_done), never
// worker_gone, unless the schedule killed that agent; every flood note the gateway or core accepted reached the primary
// exactly once and none refused (mailbox_full, rate_limited) ever did; no
// paged poll returned a message twice or went over its page bound; the Go
// heap in use (after a collection, at its peak: after each flood and at the
// end) grew by at most 4 MiB plus four mailboxes' worth; and no goroutine
// was left behind.
//
// Two known gaps are kept out of the default schedule, so that it stays a
// regression test; a flag puts each back to reproduce it:
//
//   - -chaos.unobserved: by default a worker finishes without replying only
//     after fleetd has seen it working. A turn whose agent starts and
//     finishes while fleetd sees neither status never ends, since turn_done
//     needs an observed working status.
//   - -chaos.restore: herdr restarts with session restore (its agents
//     relaunched) instead of with its agents dead. Seeds 1–60 passed with
//     it in two sweeps (the queue that stalled on seeds 18 and 60 was the
//     fake's: a status set on an agent whose relaunch was still queued left
//     its pane a bare shell). A sweep between them, under load, failed
//     seed 42 once (a reply given to the wrong turn: a prompt typed into a
//     relaunched agent before fleetd read herdr again, since fixed:
//     prompts wait for that read) and seed 24 once (a member left Ready on
//     a pane whose agent had exited; it did not recur in four runs and is
//     not understood yet). It stays off by default for that, and for one
//     gap left: a fleetd that was down while herdr restarted, and first
//     sees a relaunched agent already ready, has no evidence that it is a
//     new process, so a turn delivered but not yet seen started stays open
//     until its deadline.
//   - -chaos.idledialog: by default only a working agent stops at a dialog
//     (a permission prompt in the middle of a turn). An idle agent that
//     shows one by itself in the few milliseconds between fleetd's last
//     look at it and herdr's tab.close of a replacement is closed at its
//     dialog: herdr has no close-if-idle, and no controller sees that
//     change coming (seed 84 caught it 10 ms after the agent blocked).
//
// Messages go to any listed member, running or not (-chaos.runningonly
// narrows that): one for a member paused or deleted while it has no pane
// must end with worker_gone.
//
// Pacing steps wait a few milliseconds or until the fleet converges; they
// only shape the schedule. The seed fixes the schedule of intents, not the
// interleaving of fleetd's goroutines, so a failure may need a few runs of
// its seed to recur.
//
// The package has no non-test code and must never be imported: everything
// lives in its _test.go files. Run it with
//
//	go test -race -run TestChaos ./chaos/ -chaos.seeds=20 -chaos.steps=80
//
// and reproduce a failing seed with -chaos.seed=N.
package chaos
