package mcp

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/quota"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// MemberSource is what the REST API reads members from: the controllers'
// current view, status included.
type MemberSource interface {
	// Members returns every member, sorted by name.
	Members() []v1alpha1.Member
	// Member returns one member by name.
	Member(name string) (v1alpha1.Member, bool)
	// MemberEvents returns the member's recent events, oldest first.
	MemberEvents(name string) []v1alpha1.Event
}

// TokenResolver resolves a presented bearer token to who holds it.
type TokenResolver interface {
	Resolve(token string) (tokens.Identity, bool)
}

// Options configure [NewHandler].
type Options struct {
	Members MemberSource
	Tokens  TokenResolver
	// Metrics serves GET /metrics; nil leaves the route out.
	Metrics http.Handler
	// Ready reports readiness for GET /readyz; nil means always ready.
	Ready func() error
	// Loopback turns on the Host-header check against DNS rebinding.
	Loopback bool
	Logger   *slog.Logger

	// Store receives the member writes of bridge_spawn, bridge_stop, POST
	// and DELETE /members; nil leaves the REST writes out and makes the
	// tools fail with unavailable.
	Store DesiredState
	// Waiter lets spawn and stop wait for a member to be Ready or gone;
	// nil returns at once.
	Waiter MemberWaiter
	// Expediter forces the close of a deleted member's tab whose agent is
	// still busy (bridge_stop with force, DELETE /members/NAME?now=true);
	// nil makes such a stop fail with unavailable.
	Expediter Expediter
	// Messages is the messaging core behind the bridge_* tools; nil leaves
	// /mcp out.
	Messages Messenger
	// Registerer receives fleetd_mcp_tool_calls_total; nil registers it
	// nowhere.
	Registerer prometheus.Registerer
	// MaxBodyBytes bounds request bodies (REST writes and MCP messages);
	// default 1 MiB.
	MaxBodyBytes int64
	// Version is reported to MCP clients.
	Version string
	// ToolCallRate and ToolCallBurst bound each caller's (each bearer
	// token's) MCP tool calls: a token bucket of ToolCallBurst calls that
	// refills at ToolCallRate per second; a call over it fails with
	// rate_limited. 0 means the defaults ([DefaultToolCallRate],
	// [DefaultToolCallBurst]); a negative rate turns the limit off.
	ToolCallRate  float64
	ToolCallBurst int
	// SessionTimeout closes an MCP session with no request in flight (its
	// event stream counts as one) for this long; default
	// [DefaultSessionTimeout].
	SessionTimeout time.Duration
	// MaxSessionsPerToken caps the MCP sessions one token holds; a new one
	// over it evicts the token's least recently used idle session, or is
	// refused with 429 when none is idle. Default
	// [DefaultMaxSessionsPerToken].
	MaxSessionsPerToken int
	// Clock times session expiry and watch heartbeats; nil is the wall
	// clock.
	Clock clock.Clock

	// Nodes serves GET /nodes and /nodes/{name} (rest_nodes.go); nil
	// (the directory store) answers them 404.
	Nodes NodeSource
	// Node is this fleetd's node name in a fleet on etcd ("" for one
	// node): a member whose status.nodeName is another node runs in that
	// node's herdr, GET /members/{ref}/logs says so, and a stop of it
	// waits for that node's report (a Waiter that can: internal/fleet's
	// View), not for a pane of this node.
	Node string

	// ManifestErrors serves GET /manifests/errors (rest_manifests.go): the
	// desired state's current definition problems; nil leaves the route
	// out. ManifestsDir is the watched manifests directory, absolute ("" on
	// etcd): relative file paths in the errors are made absolute.
	ManifestErrors func() decode.ErrorList
	ManifestsDir   string

	// Prune serves GET /prune and POST /prune/confirm (rest_prune.go):
	// the members whose prune the store holds; nil leaves the routes out.
	Prune PruneHolds

	// Terminals serves GET /members/{ref}/logs (rest_logs.go); nil leaves
	// the route out. MaxFollowers caps its follow streams open at once,
	// all tokens together, a quarter of them kept for the primary;
	// MaxFollowersPerToken caps a worker token's. Defaults
	// [DefaultMaxFollowers], [DefaultMaxFollowersPerToken].
	Terminals            Terminals
	MaxFollowers         int
	MaxFollowersPerToken int
	// WatchHeartbeat is the interval of the comment lines that keep a
	// quiet member watch stream open; default [DefaultWatchHeartbeat].
	WatchHeartbeat time.Duration
	// MaxWatchersPerToken caps the member watch streams a worker token
	// holds open, MaxWatchers all tokens' together, a quarter of them kept
	// for the primary; defaults [DefaultMaxWatchersPerToken],
	// [DefaultMaxWatchers]. The watch needs Waiter.
	MaxWatchersPerToken int
	MaxWatchers         int
	// Rollouts serves the profiles' and members' rollouts
	// (rest_rollout.go: GET and POST /rollouts/…) and a Profile's status
	// in GET /profiles; nil leaves the routes out (as does a nil Store).
	Rollouts Rollouts

	// Holds is the quota of calls held open (limits.go: waits, watches,
	// follows, MCP event streams), shared with the console's event
	// streams; nil makes one of HeldLimits(DefaultHeldCalls).
	Holds *quota.Quota
}

// Handler is the HTTP handler of fleetd's listener.
type Handler struct {
	http.Handler
	s *restServer
}

// PaneGone tells the gateway that the controllers closed a member's pane
// for good (controllers.Options.OnPaneGone): bridge_stop and DELETE
// /members wait for it.
func (h *Handler) PaneGone(paneID string) { h.s.members.gone.report(paneID) }

// Close ends every MCP session still open on the gateway, with the
// goroutines that serve it. A session normally ends with its client's
// DELETE; one whose client cannot send it (its token was revoked, it went
// away) would otherwise outlive the listener. Call it after the HTTP
// server has shut down.
func (h *Handler) Close() error {
	h.EndStreams()
	if h.s.mcpServer == nil {
		return nil
	}
	h.s.sessions.closeAll()
	var errs []error
	for ss := range h.s.mcpServer.Sessions() {
		errs = append(errs, ss.Close())
	}
	h.s.sessions.settle()
	return errors.Join(errs...)
}

// NewHandler returns the HTTP handler of fleetd's listener. It fails when
// a session, follow or watch bound is negative or the tool-call counter
// cannot be registered.
func NewHandler(opts Options) (*Handler, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	timeout, maxSessions, err := opts.sessionBounds()
	if err != nil {
		return nil, err
	}
	s := &restServer{opts: opts, toolCalls: newToolCalls(), limits: newCallerLimits(opts.ToolCallRate, opts.ToolCallBurst), holds: opts.Holds}
	if s.holds == nil {
		s.holds, _ = quota.New(HeldLimits(DefaultHeldCalls))
	}
	if s.follows, err = streamQuota("MaxFollowers", opts.MaxFollowers, DefaultMaxFollowers, "MaxFollowersPerToken", opts.MaxFollowersPerToken, DefaultMaxFollowersPerToken); err != nil {
		return nil, err
	}
	if s.watches, err = streamQuota("MaxWatchers", opts.MaxWatchers, DefaultMaxWatchers, "MaxWatchersPerToken", opts.MaxWatchersPerToken, DefaultMaxWatchersPerToken); err != nil {
		return nil, err
	}
	s.streams, s.endStreams = context.WithCancel(context.Background())
	s.members = &members{source: opts.Members, store: opts.Store, waiter: opts.Waiter, expediter: opts.Expediter, node: opts.Node, gone: newPaneGone()}
	if opts.Waiter != nil {
		s.watch = newWatchHub(s.streams, opts.Members, opts.Waiter)
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(s.toolCalls); err != nil {
			return nil, fmt.Errorf("register fleetd_mcp_tool_calls_total: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	if opts.Metrics != nil {
		mux.Handle("GET /metrics", opts.Metrics)
	}
	mux.Handle("GET /members", s.authenticated(s.listMembers))
	mux.Handle("GET /members/{name}", s.authenticated(s.getMember))
	mux.Handle("GET /members/{name}/events", s.authenticated(s.memberEvents))
	s.eventRoutes(mux)         // rest_events.go
	s.nodeRoutes(mux)          // rest_nodes.go
	s.manifestErrorRoutes(mux) // rest_manifests.go
	s.rolloutRoutes(mux)       // rest_rollout.go
	s.pruneRoutes(mux)         // rest_prune.go
	if opts.Terminals != nil {
		mux.Handle("GET /members/{name}/logs", s.authenticated(s.memberLogs))
	}
	if opts.Store != nil {
		mux.Handle("POST /members", s.authenticated(s.createMember))
		mux.Handle("DELETE /members/{name}", s.authenticated(s.deleteMember))
		s.operatorObjectRoutes(mux)
	}
	if opts.Messages != nil {
		s.mailbox = NewMailbox(opts.Messages)
		mux.Handle("GET /inbox", s.authenticated(s.getInbox))
		mux.Handle("POST /inbox/ack", s.authenticated(s.ackInbox))
		s.mcpServer = s.newMCPServer()
		s.sessions = newSessionTable(opts.Clock, timeout, maxSessions, s.serverSession)
		mux.Handle("/mcp", s.newGateway(s.mcpServer))
	}
	var h http.Handler = mux
	if opts.Loopback {
		h = loopbackHostOnly(h)
	}
	return &Handler{Handler: h, s: s}, nil
}

type restServer struct {
	opts      Options
	members   *members
	toolCalls *prometheus.CounterVec
	limits    *callerLimits // nil: no rate limit
	mcpServer *sdk.Server   // nil without a messaging core
	sessions  *sessionTable // the gateway's sessions; nil without mcpServer
	mailbox   *Mailbox      // nil without a messaging core

	holds      *quota.Quota       // calls held open (limits.go)
	follows    *quota.Quota       // GET /members/{ref}/logs?follow=1 streams open
	watches    *quota.Quota       // GET /members?watch=1 streams open
	streams    context.Context    // ends every event stream when cancelled
	endStreams context.CancelFunc // by Handler.EndStreams
	watch      *watchHub          // the member watch streams; nil without a Waiter
}

// serverSession returns the gateway's open session with an id, or nil.
func (s *restServer) serverSession(id string) *sdk.ServerSession {
	for ss := range s.mcpServer.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	return nil
}

func (s *restServer) maxBody() int64 { return cmp.Or(s.opts.MaxBodyBytes, DefaultMaxBodyBytes) }

func (s *restServer) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			writeText(w, http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n")
			return
		}
	}
	writeText(w, http.StatusOK, "ok\n")
}

func (s *restServer) listMembers(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
	if isWatch(r) {
		s.watchMembers(w, r, id)
		return
	}
	items := s.opts.Members.Members()
	for i := range items {
		setMemberTypeMeta(&items[i])
	}
	writeJSON(w, http.StatusOK, MemberList{APIVersion: v1alpha1.GroupVersion, Kind: "MemberList", Items: items})
}

func (s *restServer) getMember(w http.ResponseWriter, r *http.Request, _ tokens.Identity) {
	ref := r.PathValue("name")
	m, ok := s.members.resolve(ref)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", memberNotFound(ref))
		return
	}
	setMemberTypeMeta(&m)
	writeJSON(w, http.StatusOK, m)
}

func (s *restServer) memberEvents(w http.ResponseWriter, r *http.Request, _ tokens.Identity) {
	ref := r.PathValue("name")
	m, ok := s.members.resolve(ref)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", memberNotFound(ref))
		return
	}
	events := s.opts.Members.MemberEvents(m.Name)
	if events == nil {
		events = []v1alpha1.Event{}
	}
	writeJSON(w, http.StatusOK, events)
}

// MemberList is the body of GET /members.
type MemberList struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []v1alpha1.Member `json:"items"`
}

func setMemberTypeMeta(m *v1alpha1.Member) {
	m.APIVersion = v1alpha1.GroupVersion
	m.Kind = v1alpha1.KindMember
}

// authenticated wraps a handler that needs a caller: the bearer token is
// resolved to an identity, or the request is refused with 401.
func (s *restServer) authenticated(next func(http.ResponseWriter, *http.Request, tokens.Identity)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.identify(r)
		if !ok {
			unauthorized(w)
			return
		}
		next(w, r, id)
	})
}

func (s *restServer) identify(r *http.Request) (tokens.Identity, bool) {
	token, ok := BearerToken(r)
	if !ok || s.opts.Tokens == nil {
		return tokens.Identity{}, false
	}
	return s.opts.Tokens.Resolve(token)
}

// BearerToken extracts the token of an "Authorization: Bearer …" header.
func BearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || subtle.ConstantTimeCompare([]byte(strings.ToLower(h[:len(prefix)])), []byte(prefix)) != 1 {
		return "", false
	}
	token := strings.TrimSpace(h[len(prefix):])
	return token, token != ""
}

// loopbackHostOnly refuses requests whose Host is not a loopback name, so a
// web page on another origin cannot reach the listener by rebinding DNS.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isLoopbackHost(r.Host) {
			writeError(w, http.StatusForbidden, "forbidden", "host "+quote(r.Host)+" is not a loopback name")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// APIError is the JSON body of every error response.
type APIError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var body APIError
	body.Error.Code = code
	body.Error.Message = msg
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeText(w http.ResponseWriter, status int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(s))
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
