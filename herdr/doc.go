// Package herdr is fleetd's client for herdr's Unix-socket JSON API,
// protocols 20 (herdr 0.8.x) and 22 (herdr 0.9.x): the typed calls fleetd needs to create and close workspaces, tabs and
// panes, start and prompt coding agents, wait on them and stream herdr's
// events. The wire contract is herdr's own JSON Schema of each protocol
// (herdr-api.schema.json, herdr-api.p22.schema.json) and the protocol notes
// beside them (PROTOCOL.md, PROTOCOL-22.md); every request this package sends
// is checked against a schema in its tests.
//
// # What the client guarantees
//
// One request per connection. Every call dials the socket, writes exactly one
// request line ({"id","method","params"}, params always an object, a fresh id
// per call) and then never writes again and never half-closes: herdr reads a
// single line per connection and treats any further byte, or EOF, as the
// client hanging up. The response is read as one line of any length (pane
// reads can be megabytes); a request over herdr's 1 MiB limit is refused
// locally with [ErrRequestTooLarge] instead of being dropped silently by herdr.
//
// Cancellation by closing. Long calls ([Client.WaitAgent],
// [Client.PromptAgent] with a wait, [Client.WaitEvent], [Client.Subscribe])
// run on their own connection, which is closed as soon as the context ends;
// that close is the only cancel signal herdr understands. No call has a
// timeout of its own: bound it with the context or herdr's timeout_ms.
//
// Two kinds of failure. When herdr answers with its error envelope the error
// is an [*Error] carrying herdr's code (test with [IsCode] or errors.As); when
// herdr is not there or breaks the protocol — socket missing, connection
// refused, closed before a whole response, a response that does not decode —
// it is a [*TransportError], and errors.Is(err, [ErrUnavailable]) is true.
// Context cancellation is neither: it wraps the context's error. A caller can
// therefore tell "herdr said no" from "herdr is down", and must never read a
// transport failure as "the pane is gone".
//
// Versions. [Client.Ping] accepts every protocol from [MinProtocol] (20) on:
// an older herdr is refused with an error matching [ErrProtocolMismatch] that
// names the herdr to install; one newer than [LatestProtocol] (22) is driven,
// and [Pong.Warning] names its version for the caller to log. Call it when
// connecting. Optional behaviour is decided from the Pong's [Capabilities] or
// from the error a method returns, never from the protocol number. Responses
// may carry fields this package does not know; they are ignored, and events
// of unknown kinds are still delivered.
//
// Events. [Client.Subscribe] waits for herdr's subscription_started ack (a
// refusal is returned as an [*Error]) and then delivers decoded [Event] values
// on a channel. Both of herdr's envelope styles decode to the same [Event]:
// lifecycle lines ({"event":"pane_created","data":{"type":"pane_created",…}})
// and per-pane lines ({"event":"pane.agent_status_changed","data":{…}}), the
// latter normalised to the snake_case [EventKind]. A stream ends cleanly (nil
// [Stream.Err]) when its context ends or it is closed; every other end —
// herdr closing, an error line, garbage — leaves an error matching
// [ErrStreamDropped], and the caller should resubscribe; herdr 0.9's
// events_lost (the subscriber fell behind herdr's retained history) also
// matches [ErrEventsLost]: resubscribe, then resync. herdr 0.8.2 may replay
// recently buffered events to a new subscriber, herdr 0.9 replays nothing:
// subscribe first, then take a snapshot ([Client.Snapshot]), and keep
// consumers idempotent. Response ids are not checked: each request has a
// connection of its own, and an error may come under "" or protocol 20's
// "<id>:sub:<n>:probe".
//
// Agents. [Client.LaunchAgent] is one agent.start call that returns at once.
// [Client.StartAgent] does what herdr's own CLI does: it pins the pane's
// terminal_id, retries agent_pane_busy for up to 2 s while a new pane's
// shell starts, then polls agent.get by name every 100 ms until the agent is
// interactive-ready; it fails fast on a replaced pane ([ErrPaneReplaced]) or
// another agent kind ([ErrAgentKindMismatch]), when the agent is neither
// launch-pending nor ready, or when the start timeout passes; an agent
// blocked at a dialog is returned with [ErrAgentAwaitingInput], not as a
// failure. A read of an
// idle alternate-screen agent has no side effect only from the visible
// screen or within scroll.viewport_rows. A missing boolean in herdr's
// output means false.
//
// Worktrees (protocol 22). [Client.CreateWorktree], [Client.OpenWorktree],
// [Client.ListWorktrees] and [Client.RemoveWorktree] are herdr 0.9's
// worktree.create|open|list|remove: a linked git worktree opened as a
// workspace linked to its repository. herdr 0.8 has no such methods; their
// error then matches [ErrUnsupported] (herdr's [*Error] stays in the
// chain), so that a caller falls back without knowing protocol numbers.
// The worktree_created|opened|removed events decode with their
// [WorktreeInfo] (subscribe with [SubWorktreeCreated] and its kin, which
// herdr 0.8 refuses).
//
// Socket. [New] with nil options finds the socket as herdr does
// ([ResolveSocketPath]: $HERDR_SOCKET_PATH, then HERDR_SESSION, then the
// config directory); [Options.SocketPath] overrides it, and [Options.Dial]
// replaces the socket altogether (called once per request, like the socket
// dial; herdrsim's in-memory fake plugs in there). [Options.Observer] sees
// every call's method, outcome code and duration, for metrics.
//
// # The fake herdr
//
// Package [github.com/fleetd-dev/fleetd/herdr/herdrsim] is a fake herdr
// server (a real Unix socket, in process, or in-memory connections for tests
// under testing/synctest) written from PROTOCOL.md and the
// schema independently of this client; it is the test double for everything
// above this package and the engine of `fleetd serve --herdr=sim`. It models
// the transport rules, herdr's id formats, pane env with herdr's injected
// HERDR_* variables, agent start/readiness/prompt/wait semantics and error
// codes, event emission order in both envelope styles (including
// tab.close without pane_closed and process exit with pane_exited only),
// and protocol 22's worktree methods on real git. It does not model real
// processes or terminals, screen detection, hook reports, metadata,
// layouts beyond split/close, pane.move, or herdr's 100 ms tick; its doc
// comment lists the details. When the fake and
// this client disagree, PROTOCOL.md and the schema decide.
//
// What the client must never do: keep or reuse a connection, write after the
// request line, retry on its own (whether a call may be repeated is the
// caller's decision: agent.prompt is not idempotent), or put a secret into
// anything but the request itself (pane env values travel in the request and
// appear in no error message).
package herdr
