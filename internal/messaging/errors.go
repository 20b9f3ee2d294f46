package messaging

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error word. Adapters pass it through
// unchanged (the MCP tool error's code, the REST error body's code).
type Code string

// Error codes returned by the core.
const (
	// CodeWorkerGone: the worker was deleted, paused or its pane died while a
	// call concerned it.
	CodeWorkerGone Code = "worker_gone"
	// CodeNotFound: no open turn has the given id (or it belongs to another
	// worker).
	CodeNotFound Code = "not_found"
	// CodeDeliveryFailed: herdr refused the prompt for good (the agent or pane
	// does not exist, the prompt was rejected).
	CodeDeliveryFailed Code = "delivery_failed"
	// CodeTooLarge: content exceeds Options.MaxContentBytes.
	CodeTooLarge Code = "too_large"
	// CodeTooManyWaiters: the caller already holds Options.MaxWaitersPerCaller
	// blocking calls, or the turn already has a call waiting on it.
	CodeTooManyWaiters Code = "too_many_waiters"
	// CodeMailboxFull: the recipient's mailbox holds
	// Options.MaxMailboxMessages messages or Options.MaxMailboxBytes of
	// content; nothing was stored.
	CodeMailboxFull Code = "mailbox_full"
	// CodeInvalid: a required argument is missing or malformed.
	CodeInvalid Code = "invalid_argument"
	// CodeUnavailable: the core is closed or its journal failed; nothing was
	// acknowledged.
	CodeUnavailable Code = "unavailable"
)

// Error is the core's typed error. Check it with errors.As or [CodeOf].
type Error struct {
	Code Code
	Msg  string
	Err  error // underlying cause, if any
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Msg, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the Code of err if it is or wraps an *Error, else "".
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}
