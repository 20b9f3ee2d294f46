// Package herdrsim is the simulated herdr: the fake herdr server every test
// runs against and the engine of `fleetd serve --herdr=sim`, a real Unix-socket
// server, in process, that implements herdr's socket API from PROTOCOL.md,
// PROTOCOL-22.md and herdr's own JSON Schemas, independently of fleetd's
// client. It speaks protocol 22 (herdr 0.9.3, what people run) by default
// and protocol 20 (herdr 0.8.2) with Options.Protocol 20; the differences
// are listed under "Protocols" below.
// With [Options.InMemory] it has no socket at all: [Server.Dial] hands out
// one end of a [net.Pipe] per connection and serves the other end with the
// same code, so that tests can run under testing/synctest (a goroutine
// blocked on a real socket is not durably blocked, and virtual time would
// stand still).
// It must stay faithful to herdr: when a client and the fake disagree, the
// fake is changed only if herdr behaves differently, never to suit a
// client.
//
// What it models. Transport: one request per connection (one line read,
// one line answered, then close; bytes after the first newline are never
// read), a 1 MiB request limit, and silent close for a line that is too
// big, late (5 s), cut short, empty or not UTF-8. With an
// [Options.Validator] — every test passes herdr's schema through package
// herdr/herdrsim/validated — every request is checked against the schema;
// an unparseable one, an unknown method or a missing or mistyped param is
// answered with invalid_request (and, in protocol 20, an empty id). The fake itself never
// imports a schema validator, so that fleetd's embedded simulation
// (--herdr=sim) links none. State:
// workspaces, tabs and panes with herdr's id formats (bijective base-32
// numbers, "w<n>", "w1:t<n>", "w1:p<n>", per-workspace tab and pane counters
// that never reuse a number, "term_<hex µs><hex counter>" terminal ids),
// labels, cwd, the env given at creation overlaid by herdr's injected
// HERDR_* / TERM / COLORTERM variables (CODEX_THREAD_ID removed), focus and
// a split layout. Agents: agent.start's validation order and error codes,
// launch_pending → interactive_ready after Options.ReadyDelay (or a failed
// launch that clears the name), internal states idle/working/blocked/unknown
// with herdr's seen rule (an agent finishing outside the active tab of the
// active workspace reports "done"), state_change_seq, agent.prompt with
// agent_blocked, agent_not_ready, empty_agent_prompt and, with wait,
// agent_prompt_stalled / timeout, agent.wait and events.wait (immediate
// when already matching, transient statuses count, agent_not_running or
// pane_not_found when the pane goes). Long calls wake on model changes,
// never by polling, and stop silently when the peer closes or sends any
// byte. Events follow herdr's emission order and both envelope styles
// (snake_case lifecycle lines with a "type" tag; dot-named per-pane
// pane.agent_status_changed lines without), including the uneven rules:
// tab.close emits no pane_closed, the last pane of a tab closes the tab
// silently, a process exit emits pane_exited only. In protocol 20,
// lifecycle subscriptions replay the ring of the last 512 events, as herdr's
// source suggests (unverified; Options.NoReplay turns it off), and yield at
// most one event per subscription per round, like herdr's per-tick loop.
// Every change of a
// pane's public status is published as the hub event
// pane_agent_status_changed (seen by events.wait and per-pane
// subscriptions) followed by pane_updated (unverified: herdr's docs only
// suggest watching pane.updated); an agent becoming ready emits
// pane_agent_detected, an agent exiting to its shell pane_agent_detected
// with released and final_status.
//
// Tests script agents with [Behavior] (work for a while, finish, block,
// crash, exit, ignore prompts, or a custom OnPrompt hook) and drive them
// with [Server.SetAgentState], [Server.SetAgentStatus], [Server.ExitAgent]
// and [Server.KillPane]; they read [Server.Prompts], [Server.PaneEnv],
// [Server.Requests], [Server.Calls] and [Server.Events]; they synchronise
// with [Server.WaitCalls] and [Server.WaitParked] (a long call has resolved
// its target and is waiting) instead of sleeping; they inject faults
// ([Fault]: latency, hang, drop, garbage) and [Server.Stop] and
// [Server.Restart] serving on the same path (in memory: Dial refused
// with ECONNREFUSED while stopped). Every modelled delay runs on
// Options.Clock (internal/clock, the one clock fleetd uses); with a
// clock.Fake a test moves time itself and never sleeps.
//
// Worktrees (protocol 22): worktree.create, open, list and remove run the
// system git (package internal/gitrepo) on real repositories — tests make
// throwaway ones — outside the model's lock: a new worktree opens as a
// workspace linked to its repository (WorkspaceInfo.worktree, and
// workspace_group_close_required on the repository's own workspace),
// worktree.open answers already_open for a worktree a workspace shows,
// worktree.remove refuses a checkout with changes unless forced and closes
// the workspace that showed it, and each emits its worktree_* event after
// the workspace's creation events. [Server.TrustedRepositories] lists what
// trust_repository asked to trust. worktrees.go lists the fake's own
// choices (error codes, default paths and labels). Protocol 20 answers the
// four methods with invalid_request, as herdr 0.8 answers an unknown method.
//
// What it does not model: real processes or terminals (a pane's screen is
// a list of lines: typed input is echoed, Enter submits, agents' replies
// are text a test provides), ANSI output (format "ansi" returns plain
// text), screen-manifest detection, hook reports (pane.report_agent),
// metadata, plugins, layouts beyond split/close, pane.move,
// focus and rename methods, scroll events, herdr's 100 ms tick (events are
// delivered as soon as they happen, so herdr's coalescing of statuses
// between ticks is not reproduced), the auto-created default workspace,
// persistence of screens across herdr restarts, and resume_argv. Methods it does not model answer
// not_implemented. Default labels, the layout's split ids and the
// capabilities reported by ping are the fake's own choices.
package herdrsim
