// Package console is fleetd's browser console, served at /ui on fleetd's
// own listener: who needs a person (an agent blocked at a dialog, a
// worker's question waiting for the primary, a crash-looping member,
// herdr unreachable), the Profile rollouts under way, paused or stopped
// and what each waits for (a member's agent to be idle, its turn, its new
// agent to be Ready: Options.Profiles and the members' conditions), what
// every member is doing, and the primary's
// actions — send a task, answer a question, pause, resume, delete, apply a
// Member, Profile or Tenant — from one page.
//
// # Login
//
// The primary's bearer token never reaches the browser. `fleetd ui` spends
// it on POST /ui/codes for a one-time login code: 256 random bits, kept
// only as a SHA-256 hash, valid for [DefaultCodeTTL], used once, compared
// in constant time, at most [DefaultMaxCodes] unused at once. GET
// /ui/login?code=… trades the code for a session and answers 303 to /ui/,
// so the code leaves the address bar at once (and every page is sent with
// Referrer-Policy: no-referrer). The session's id lives only in an HttpOnly,
// SameSite=Strict cookie with Path=/ui; fleetd keeps its hash. A session
// ends after [DefaultSessionIdle] unused, [DefaultSessionLifetime] after
// login, or at logout; at most [DefaultMaxSessions] exist, a new login over
// the bound ending the least recently used. Without a session a page
// redirects to the login page, which says to run `fleetd ui`.
//
// Every state-changing request is a POST that must carry an Origin header
// equal to the console's own origin and the session's CSRF token (a
// random value shown in the page's <meta name="csrf">, sent back in the
// X-CSRF-Token header or a csrf form field — never the cookie). Bodies are
// bounded. The listener's Host check (DNS rebinding) is applied by the
// daemon, the same one the REST API and gateway have.
//
// # Live pages
//
// The overview and a member page each hold one server-sent event stream
// (GET /ui/events) that carries the page's live part, rendered on the
// server by the same templates as the page. The stream renders when the
// controllers report a change of any member's status or of the desired
// state ([Members.Changed]) or the messaging core reports one
// ([Messenger.Changed]: a question, a reply, an answer, an ack), and sends
// only a rendering that differs from the last, framed by internal/sse (the
// rendering holds worker text: no line end in it can end the event early
// or forge another). A page's rendering is made once per change and shared
// by every stream that shows the page, each writing the same encoded event
// (live.go): a stream keeps no copy of its own. Nothing polls; the one
// timer is the session's expiry. At most [DefaultMaxStreams] streams are
// open at once, each a held call of the listener's quota (Options.Holds).
//
// What a page shows of a text someone else wrote — a worker's reply or
// question, an agent's screen, an error — is at most a few KiB of it
// (maxShownBytes; a member's spec maxSpecBytes), escaped once by the
// templates; a reply or question cut short links to GET /ui/messages/{id}
// or /ui/questions/{turn}, which serve it whole as plain text (text.go). A stream does not keep its session alive (only requests
// do) and ends with it: at logout or expiry it sends "ended" and closes, so
// a page left open after logging out elsewhere stops showing the fleet.
//
// # Acting
//
// Actions go through the code paths the CLI and MCP use, with their
// validation and errors: a send is the primary's bridge_send without
// waiting (the reply lands in the primary's mailbox, which the pages
// show), an answer is bridge_send with the question's turn id (it resolves
// the worker's held bridge_ask), pause and resume set spec.paused and
// delete removes the Member through the desired-state store, and apply
// decodes one Member, Profile or Tenant strictly with package decode,
// checks it as the REST API does (a Member: the spawn guard and the
// Profile and Tenant it names; a Profile or Tenant: guard.CheckObjectWrite
// against its stored definition), shows a diff against the stored
// definition (dry run), and writes it through the store.
//
// The member page's terminal tail, and the end of the screen of an agent
// blocked at a prompt under Needs you (a tail.Excerpt of it), are read
// from herdr's visible screen through internal/tail (Options.Tails,
// herdrprompt's reader, whose read is tail.Screen: reading changes
// nothing), once per
// state of the agent (pane, status, state-change sequence, last delivery)
// for each page, at most [maxPromptReads] blocked agents per overview.
//
// In a fleet on etcd (Options.Node set) Members lists every node's members
// with the status their nodes publish, and Messenger's Status gives a
// remote member's published messaging state. A member another node runs
// has its terminal in that node's herdr: the console reads no tail or
// blocked screen of it and its page names the node instead; pause, resume
// and delete go through the fleet's desired state as for any member.
//
// The package never imports mcp, the controllers or herdr: it declares the
// small interfaces it needs (Members, Messenger, DesiredState,
// TokenResolver; a tail.Reader for terminals) and internal/daemon passes the controllers' manager, the
// messaging core, the store and the prompter. Its pages are Go templates
// and its script and style sheet are embedded files (no build step, no
// inline script: the Content-Security-Policy allows script-src 'self'
// only).
package console
