package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// Error code words of the gateway's tool errors and REST error bodies. The
// messaging core's codes (worker_gone, not_found, delivery_failed,
// too_large, too_many_waiters, mailbox_full, invalid_argument, unavailable)
// pass through unchanged.
const (
	codeUnauthorized         = "unauthorized"
	codeForbidden            = "forbidden"
	codeNotFound             = string(messaging.CodeNotFound)
	codeInvalidArgument      = string(messaging.CodeInvalid)
	codeInvalidSpec          = "invalid_spec"
	codeConflict             = "conflict"
	codeSubscriptionBoundary = "subscription_boundary"
	codeTooLarge             = string(messaging.CodeTooLarge)
	codeUnavailable          = string(messaging.CodeUnavailable)
	codeMailboxFull          = string(messaging.CodeMailboxFull)
	codeTooManyWaiters       = string(messaging.CodeTooManyWaiters)
	codeRateLimited          = "rate_limited"
	codeCancelled            = "cancelled"
	codeInternal             = "internal"
)

// ToolError is a tool's or a REST write's failure: a stable code word and a
// message for a person or a model. It is also the structured content of an
// MCP tool error result.
type ToolError struct {
	Code    string `json:"code" jsonschema:"stable error word, e.g. forbidden, not_found, worker_gone, invalid_spec, subscription_boundary"`
	Message string `json:"message" jsonschema:"what went wrong and what to do about it"`
}

func (e *ToolError) Error() string { return e.Code + ": " + e.Message }

func toolErr(code, format string, args ...any) *ToolError {
	return &ToolError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// fromCore maps an error of the messaging core (or of a context) to a
// ToolError, keeping the core's code word.
func fromCore(err error) *ToolError {
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	if code := messaging.CodeOf(err); code != "" {
		var me *messaging.Error
		errors.As(err, &me)
		return &ToolError{Code: string(code), Message: me.Msg}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &ToolError{Code: codeCancelled, Message: "the request was cancelled"}
	}
	return &ToolError{Code: codeInternal, Message: err.Error()}
}

// httpStatus is the REST status of a code word.
func httpStatus(code string) int {
	switch code {
	case codeUnauthorized:
		return http.StatusUnauthorized
	case codeForbidden, codeSubscriptionBoundary:
		return http.StatusForbidden
	case codeNotFound:
		return http.StatusNotFound
	case codeInvalidSpec:
		return http.StatusUnprocessableEntity
	case codeConflict:
		return http.StatusConflict
	case codeInvalidArgument:
		return http.StatusBadRequest
	case codeTooLarge:
		return http.StatusRequestEntityTooLarge
	case codeUnavailable:
		return http.StatusServiceUnavailable
	case codeRateLimited, codeTooManyWaiters:
		return http.StatusTooManyRequests
	default:
		return http.StatusInternalServerError
	}
}
