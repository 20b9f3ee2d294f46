package mcp

// The gateway is the go-sdk's Streamable HTTP handler behind two layers of
// fleetd's own:
//
//   - authentication: the request's bearer token is resolved to a
//     [tokens.Identity] before the SDK sees anything; an unknown or missing
//     token is an HTTP 401 with fleetd's JSON error body.
//   - session binding: the identity travels to the SDK as an
//     [auth.TokenInfo] whose UserID is a hash of the presented token. The SDK
//     binds every session to the UserID of the request that created it and
//     refuses (403) a request for that session carrying any other token, so
//     a session opened with one token cannot be continued with another, and
//     a worker whose token was revoked (pane replaced, member deleted) is
//     refused at the door.
//   - session bounds: every authenticated request passes the gateway's
//     session table (sessions.go), which expires idle sessions and caps
//     each token's.
//   - held calls: a session's event stream (GET /mcp) and a tool call that
//     waits for its outcome take a slot of the held-call quota (limits.go)
//     for as long as they are held, or are refused with 429 (the stream)
//     or too_many_waiters (the call).
//
//   - request scope: a tool call ends when the HTTP request that carried
//     it ends (its client went away), so that a held call releases its
//     waiter and its outcome goes to the mailbox (see requestScoped).
//
// One [sdk.Server] serves every session. Tool handlers read the caller from
// the request's TokenInfo (see callerOf), never from an argument. A receiving
// middleware turns every tool error into a result carrying a stable code
// word, both as structured content {code, message} and as text
// "code: message", and counts fleetd_mcp_tool_calls_total{tool,outcome}.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// identityKey is the TokenInfo.Extra key holding the caller's identity.
const identityKey = "fleetd.identity"

// requestKey is the TokenInfo.Extra key holding the context of the HTTP
// request that carried a message (see requestScoped).
const requestKey = "fleetd.request"

type callerCtxKey struct{}

// newGateway returns the /mcp handler for server s.
func (s *restServer) newGateway(srv *sdk.Server) http.Handler {
	streamable := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Logger: s.opts.Logger, MaxRequestBodyBytes: s.maxBody()})
	// The SDK's own check turns the identity our middleware found into the
	// session-bound TokenInfo; it cannot fail for a request that got this far.
	verify := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		c, ok := ctx.Value(callerCtxKey{}).(caller)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.sessionKey, Extra: map[string]any{identityKey: c.Identity, requestKey: ctx}}, nil
	}
	bound := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := BearerToken(r)
		id, known := tokens.Identity{}, false
		if ok && s.opts.Tokens != nil {
			id, known = s.opts.Tokens.Resolve(token)
		}
		if !known {
			unauthorized(w)
			return
		}
		if r.Method == http.MethodGet {
			// A session's event stream is held until the session ends.
			release, te := s.hold(id)
			if te != nil {
				writeToolError(w, te)
				return
			}
			defer release()
		}
		sum := sha256.Sum256([]byte(token))
		c := caller{Identity: id, sessionKey: "token-sha256:" + hex.EncodeToString(sum[:])}
		s.sessions.serve(w, r.WithContext(context.WithValue(r.Context(), callerCtxKey{}, c)), c.sessionKey, bound)
	})
}

// caller is an authenticated request's identity and the key its MCP session
// is bound to.
type caller struct {
	tokens.Identity
	sessionKey string
}

// callerOf returns the identity of a tool call's caller.
func callerOf(req *sdk.CallToolRequest) (tokens.Identity, error) {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return tokens.Identity{}, toolErr(codeUnauthorized, "no authenticated caller")
	}
	id, ok := req.Extra.TokenInfo.Extra[identityKey].(tokens.Identity)
	if !ok {
		return tokens.Identity{}, toolErr(codeUnauthorized, "no authenticated caller")
	}
	return id, nil
}

func isPrimary(id tokens.Identity) bool { return id.Role == tokens.RolePrimary }

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="fleetd"`)
	writeError(w, http.StatusUnauthorized, codeUnauthorized,
		"missing or unknown bearer token; use the primary token from STATE_DIR/primary.token (see `fleetd mcp-config`) or a worker's FLEETD_TOKEN")
}

// toolMiddleware gives every tool error a code word and counts the call.
func (s *restServer) toolMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		ctx, release := requestScoped(ctx, req)
		defer release()
		name := "unknown"
		if ctr, ok := req.(*sdk.CallToolRequest); ok && ctr.Params != nil {
			if slices.Contains(toolNames, ctr.Params.Name) {
				name = ctr.Params.Name
			}
			// "arguments": null means none; the SDK would fail applying
			// defaults to it.
			if string(bytes.TrimSpace(ctr.Params.Arguments)) == "null" {
				ctr.Params.Arguments = json.RawMessage("{}")
			}
		}
		res, err := next(ctx, method, req)
		outcome := "ok"
		switch r, _ := res.(*sdk.CallToolResult); {
		case err != nil:
			outcome = "protocol_error"
		case r != nil && r.IsError:
			te := asToolError(r.GetError())
			outcome = te.Code
			r.Content = []sdk.Content{&sdk.TextContent{Text: te.Code + ": " + te.Message}}
			r.StructuredContent = te
		}
		s.toolCalls.WithLabelValues(name, outcome).Inc()
		return res, err
	}
}

// requestScoped ends a tool call's context when the HTTP request that
// carried the call ends: its client went away (the connection closed) or
// the server is shutting it down. The SDK keeps a call of a stateful
// session running after its POST is gone, for a client that would resume
// the stream; fleetd keeps no event store, so nobody ever could, and a held
// call (bridge_send or bridge_poll with wait, bridge_ask) would otherwise
// keep its waiter, take the outcome it waits for into the void (the reply
// never reaching the primary's mailbox) and hold its session's DELETE
// until it returns. Ended, the call releases its waiter, as a cancelled
// request does (DESIGN 5.3), and the outcome lands in the mailbox.
func requestScoped(ctx context.Context, req sdk.Request) (context.Context, func()) {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return ctx, func() {}
	}
	rc, ok := extra.TokenInfo.Extra[requestKey].(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(rc, cancel)
	return ctx, func() { stop(); cancel() }
}

// asToolError finds the *ToolError in err, or classifies err: the SDK's own
// argument validation becomes invalid_argument.
func asToolError(err error) *ToolError {
	var te *ToolError
	switch {
	case errors.As(err, &te):
		return te
	case err == nil:
		return &ToolError{Code: codeInternal, Message: "tool failed"}
	default:
		return &ToolError{Code: codeInvalidArgument, Message: err.Error()}
	}
}
