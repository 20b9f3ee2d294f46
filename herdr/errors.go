package herdr

import (
	"errors"
	"fmt"
)

// Error is herdr's error envelope: herdr understood the request and refused it.
// Code is herdr's machine-readable code ("pane_not_found", "agent_pane_busy",
// "timeout", …); Method is the method that was called.
type Error struct {
	Method  string
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("herdr %s: %s: %s", e.Method, e.Code, e.Message)
}

// IsCode reports whether err is or wraps a herdr [Error] with the given code.
func IsCode(err error, code string) bool {
	var he *Error
	return errors.As(err, &he) && he.Code == code
}

// ErrUnavailable matches (errors.Is) every [TransportError]: herdr could not be
// reached or did not answer properly, as opposed to answering with an [Error].
var ErrUnavailable = errors.New("herdr unavailable")

// ErrStreamDropped matches the error of an events.subscribe [Stream] that
// ended because herdr closed it, sent an error line or sent garbage — never
// because its context was cancelled or it was closed. Resubscribe.
var ErrStreamDropped = errors.New("herdr event stream dropped")

// ErrEventsLost matches (with [ErrStreamDropped]) the error of a stream that
// herdr closed with events_lost (protocol 22): the subscriber fell behind
// herdr's retained history. Resubscribe, then resync from a snapshot.
var ErrEventsLost = errors.New("herdr events lost")

// ErrProtocolMismatch is returned by [Client.Ping] when herdr speaks a protocol
// older than [MinProtocol].
var ErrProtocolMismatch = errors.New("herdr protocol mismatch")

// ErrRequestTooLarge is returned, without contacting herdr, for a request line
// over herdr's 1 MiB limit (herdr would drop the connection without a reply).
var ErrRequestTooLarge = errors.New("herdr request exceeds 1 MiB")

// ErrAgentStartFailed matches every failure of [Client.StartAgent] after the
// agent.start call itself was accepted; ErrAgentStartTimeout additionally
// matches the deadline case.
var (
	ErrAgentStartFailed  = errors.New("agent did not become ready")
	ErrAgentStartTimeout = errors.New("agent start timed out")
)

// ErrAgentKindMismatch (with ErrAgentStartFailed) is a start that herdr
// resolved to another agent kind than the one asked for; ErrPaneReplaced
// (with ErrAgentStartFailed) one whose pane got another terminal while it
// started (the pane was replaced: herdr restarted or handed off, or it was
// closed and its id reused). [Client.StartAgent] fails fast on both.
var (
	ErrAgentKindMismatch = errors.New("agent kind mismatch")
	ErrPaneReplaced      = errors.New("pane replaced while the agent started")
)

// ErrAgentAwaitingInput is returned by [Client.StartAgent], together with
// the agent's info, when the agent came up blocked at a dialog (a first-run
// trust prompt, a login): launch-pending, not interactive-ready, status
// blocked. herdr sets no startup deadline for it; it becomes ready when a
// person answers the dialog in herdr. It is not a failed start and does not
// match ErrAgentStartFailed.
var ErrAgentAwaitingInput = errors.New("agent is waiting for a person at a dialog")

// Transport failure reasons, also the code passed to an [Observer].
const (
	ReasonUnavailable = "unavailable"  // dialing the socket failed (missing, refused, permissions)
	ReasonClosed      = "closed"       // the connection failed or closed before a whole response
	ReasonBadResponse = "bad_response" // the response line is not a herdr response of the expected type
)

// TransportError means herdr was not there or broke the protocol: the socket
// is missing or refuses connections, the connection closed before a response,
// or the response could not be decoded. errors.Is(err, ErrUnavailable) is true
// for every TransportError; Err keeps the underlying cause (for example
// fs.ErrNotExist or syscall.ECONNREFUSED).
type TransportError struct {
	Method string
	Reason string // ReasonUnavailable, ReasonClosed or ReasonBadResponse
	Err    error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("herdr %s: %s: %v", e.Method, e.Reason, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// Is makes every TransportError match [ErrUnavailable].
func (e *TransportError) Is(target error) bool { return target == ErrUnavailable }
