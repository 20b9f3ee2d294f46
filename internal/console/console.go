package console

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/quota"
	"github.com/fleetd-dev/fleetd/internal/tail"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// Members is the controllers' view of the fleet, status included
// (controllers.Manager).
type Members interface {
	// Members returns every member, sorted by name.
	Members() []v1alpha1.Member
	// Member returns one member by name.
	Member(name string) (v1alpha1.Member, bool)
	// MemberEvents returns the member's recent events, oldest first.
	MemberEvents(name string) []v1alpha1.Event
	// Changed is closed at the next change of any member's status or of
	// the desired state.
	Changed() <-chan struct{}
}

// Messenger is the messaging core, the one the MCP tools use
// (*messaging.Core).
type Messenger interface {
	Send(ctx context.Context, req messaging.SendRequest) (messaging.SendResult, error)
	Status(name string) messaging.WorkerStatus
	Busy() []string
	PollPage(ctx context.Context, recipient string, req messaging.PollRequest) (messaging.PollPage, error)
	Ack(recipient string, ids []string) (int, error)
	// Changed is closed after the next call that may have changed the
	// core's state.
	Changed() <-chan struct{}
}

// DesiredState is the declared fleet the writes go through: the same store
// the REST API and bridge_spawn write (controllers.Manager.Store()).
type DesiredState interface {
	Get(kind, name string) (v1alpha1.Object, bool)
	List(kind string) []v1alpha1.Object
	Apply(ctx context.Context, obj v1alpha1.Object) error
	Delete(ctx context.Context, kind, name string) error
}

// TokenResolver resolves a bearer token (the primary's, for POST
// /ui/codes).
type TokenResolver interface {
	Resolve(token string) (tokens.Identity, bool)
}

// Options configure [New]. Members, Messages, Store and Tokens are
// required; a zero bound means its default.
type Options struct {
	Members  Members
	Messages Messenger
	Store    DesiredState
	Tokens   TokenResolver
	// Tails reads terminal tails for the member page and Needs you
	// (herdrprompt.Prompter: internal/tail's screen read); nil shows none.
	Tails tail.Reader
	// Profiles returns every profile with its status (its rollout to its
	// members: controllers.Manager.Profiles); the overview shows the
	// rollouts under way, paused or stopped, and what each waits for. nil
	// shows none.
	Profiles func() []v1alpha1.Profile
	// Herdr reports whether fleetd's view of herdr is in sync; an error is
	// shown under Needs you. nil means always reachable.
	Herdr func() error
	// PrimaryName is the primary's name in the messaging core.
	PrimaryName string
	// Node is this fleetd's node name in a fleet on etcd, where Members
	// lists every node's members; "" for one node. A member whose
	// status.nodeName is another node runs in that node's herdr: its
	// terminal is not read here (the page names its node instead).
	Node   string
	Logger *slog.Logger
	// Clock times codes and sessions; nil is the wall clock.
	Clock clock.Clock

	CodeTTL         time.Duration // a login code's life; default DefaultCodeTTL
	MaxCodes        int           // unused codes at once; default DefaultMaxCodes
	SessionIdle     time.Duration // a session unused this long ends; default DefaultSessionIdle
	SessionLifetime time.Duration // a session ends this long after login; default DefaultSessionLifetime
	MaxSessions     int           // sessions at once; default DefaultMaxSessions
	// MaxStreams bounds the open event streams (all sessions together);
	// default DefaultMaxStreams.
	MaxStreams int
	// Holds is the quota of calls held open on fleetd's listener, shared
	// with the gateway (mcp.Options.Holds): every event stream takes one of
	// the primary's slots. nil bounds nothing beyond MaxStreams.
	Holds *quota.Quota
}

// Other bounds.
const (
	DefaultMaxStreams = 32
	maxFormBytes      = 1 << 20 // a POST body: a Member's YAML, an answer
	tailLines         = 40
	tailTimeout       = 2 * time.Second
	inboxLimit        = 100
)

// Prefix is where the console is mounted on fleetd's listener.
const Prefix = "/ui"

const cookieName = "fleetd_ui"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Console is the browser console's HTTP handler, mounted at [Prefix].
type Console struct {
	o        Options
	codes    *codes
	sessions *sessions
	pages    *template.Template
	streams  chan struct{} // a slot per open event stream
	live     livePages     // the live parts the streams show, rendered once per change
	mux      *http.ServeMux
	// ending is closed by EndStreams: every event stream ends.
	ending  chan struct{}
	endOnce sync.Once
}

// EndStreams ends every open event stream, and those opened later at once:
// an event stream never goes idle, so an HTTP server's Shutdown would wait
// for it (register it with http.Server.RegisterOnShutdown).
func (c *Console) EndStreams() { c.endOnce.Do(func() { close(c.ending) }) }

// New returns the console. It fails when a required part is missing or a
// bound is negative.
func New(o Options) (*Console, error) {
	if o.Members == nil || o.Messages == nil || o.Store == nil || o.Tokens == nil {
		return nil, errors.New("console: Members, Messages, Store and Tokens are required")
	}
	if o.CodeTTL < 0 || o.SessionIdle < 0 || o.SessionLifetime < 0 || o.MaxCodes < 0 || o.MaxSessions < 0 || o.MaxStreams < 0 {
		return nil, errors.New("console: a bound is negative; want a positive value, or 0 for the default")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	o.PrimaryName = cmp.Or(o.PrimaryName, messaging.DefaultPrimaryName)
	pages, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	c := &Console{
		o:     o,
		codes: &codes{clock: o.Clock, ttl: cmp.Or(o.CodeTTL, DefaultCodeTTL), max: cmp.Or(o.MaxCodes, DefaultMaxCodes)},
		sessions: &sessions{clock: o.Clock, idle: cmp.Or(o.SessionIdle, DefaultSessionIdle),
			lifetime: cmp.Or(o.SessionLifetime, DefaultSessionLifetime), max: cmp.Or(o.MaxSessions, DefaultMaxSessions),
			byID: map[[32]byte]*session{}},
		pages:   pages,
		streams: make(chan struct{}, cmp.Or(o.MaxStreams, DefaultMaxStreams)),
		ending:  make(chan struct{}),
	}
	assets, _ := fs.Sub(assetFS, "assets")
	mux := http.NewServeMux()
	mux.Handle("GET /ui/assets/", http.StripPrefix("/ui/assets/", http.FileServerFS(assets)))
	mux.HandleFunc("POST /ui/codes", c.mintCode)
	mux.HandleFunc("GET /ui/login", c.login)
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusSeeOther) })
	mux.HandleFunc("GET /ui/{$}", c.page(c.overviewPage))
	mux.HandleFunc("GET /ui/members/{name}", c.page(c.memberPage))
	mux.HandleFunc("GET /ui/apply", c.page(c.applyPage))
	mux.HandleFunc("GET /ui/events", c.authed(c.events))
	mux.HandleFunc("GET /ui/messages/{id}", c.page(c.messageText))
	mux.HandleFunc("GET /ui/questions/{turn}", c.page(c.questionText))
	mux.HandleFunc("POST /ui/logout", c.action(c.logout))
	mux.HandleFunc("POST /ui/members/{name}/send", c.action(c.send))
	mux.HandleFunc("POST /ui/members/{name}/pause", c.action(c.pause(true)))
	mux.HandleFunc("POST /ui/members/{name}/resume", c.action(c.pause(false)))
	mux.HandleFunc("POST /ui/members/{name}/delete", c.action(c.deleteMember))
	mux.HandleFunc("POST /ui/answer", c.action(c.answer))
	mux.HandleFunc("POST /ui/ack", c.action(c.ack))
	mux.HandleFunc("POST /ui/apply", c.action(c.apply))
	c.mux = mux
	return c, nil
}

// ServeHTTP serves the console with its security headers on every answer.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// mintCode is POST /ui/codes: the primary's token buys one login code.
func (c *Console) mintCode(w http.ResponseWriter, r *http.Request) {
	id, ok := c.bearer(r)
	if !ok || id.Role != tokens.RolePrimary {
		writeJSON(w, http.StatusUnauthorized, result{Error: "POST /ui/codes takes the primary's token (Authorization: Bearer); run `fleetd ui`"})
		return
	}
	code, exp, err := c.codes.mint()
	if err != nil {
		writeJSON(w, http.StatusTooManyRequests, result{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, CodeResponse{Code: code, Path: "/ui/login?code=" + code, ExpiresAt: exp.UTC()})
}

// CodeResponse is the body of POST /ui/codes.
type CodeResponse struct {
	Code      string    `json:"code"`
	Path      string    `json:"path"`
	ExpiresAt time.Time `json:"expiresAt"`
}

func (c *Console) bearer(r *http.Request) (tokens.Identity, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return tokens.Identity{}, false
	}
	return c.o.Tokens.Resolve(strings.TrimSpace(h[len(prefix):]))
}

// login is GET /ui/login: with a good code it opens a session and sends
// the browser on to a URL without the code; otherwise it says how to get
// one.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	code := r.URL.Query().Get("code")
	if code == "" {
		if _, ok := c.current(r); ok {
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
			return
		}
		c.render(w, http.StatusOK, "login", loginView{Title: "log in", UICommand: uiCommand(r.Host)})
		return
	}
	if !c.codes.redeem(code) {
		c.render(w, http.StatusUnauthorized, "login", loginView{Title: "log in", Refused: true, UICommand: uiCommand(r.Host)})
		return
	}
	id, _ := c.sessions.start()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		MaxAge: int(c.sessions.lifetime / time.Second)})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

type loginView struct {
	Title, CSRF string // CSRF is always empty: no session yet
	Refused     bool
	UICommand   string // the `fleetd ui` that reaches this fleetd
}

// uiCommand is the `fleetd ui` that reaches the fleetd the browser asked
// at host: with --server unless that is the command's default address
// (port 8080 of the loopback).
func uiCommand(host string) string {
	if h, port, err := net.SplitHostPort(host); err == nil && port == "8080" && (h == "127.0.0.1" || h == "localhost") {
		return "fleetd ui"
	}
	return "fleetd ui --server http://" + host
}

func (c *Console) current(r *http.Request) (session, bool) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return session{}, false
	}
	return c.sessions.lookup(ck.Value)
}

// sessionID is the request's session cookie, for a handler that already
// checked it names a live session.
func sessionID(r *http.Request) string {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return ""
	}
	return ck.Value
}

// page wraps a GET page: without a session the browser goes to the login
// page.
func (c *Console) page(f func(w http.ResponseWriter, r *http.Request, s session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.current(r)
		if !ok {
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		f(w, r, s)
	}
}

// authed wraps a GET that is not a page (the event stream): 401 without a
// session.
func (c *Console) authed(f func(w http.ResponseWriter, r *http.Request, s session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.current(r)
		if !ok {
			writeJSON(w, http.StatusUnauthorized, result{Error: "not logged in; run `fleetd ui`"})
			return
		}
		f(w, r, s)
	}
}

// action wraps a state-changing POST: a session, a same-origin Origin
// header and the session's CSRF token (header X-CSRF-Token or form field
// csrf) are all required; the body is bounded.
func (c *Console) action(f func(w http.ResponseWriter, r *http.Request) (result, int)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.current(r)
		if !ok {
			writeJSON(w, http.StatusUnauthorized, result{Error: "not logged in; run `fleetd ui`"})
			return
		}
		if origin := r.Header.Get("Origin"); origin == "" || origin != "http://"+r.Host {
			writeJSON(w, http.StatusForbidden, result{Error: "refused: the request's Origin is not this console's"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseMultipartForm(maxFormBytes); err != nil && !errors.Is(err, http.ErrNotMultipart) {
			writeJSON(w, http.StatusBadRequest, result{Error: "read the form: " + err.Error()})
			return
		}
		token := cmp.Or(r.Header.Get("X-CSRF-Token"), r.PostFormValue("csrf"))
		if !sameSecret(token, s.csrf) {
			writeJSON(w, http.StatusForbidden, result{Error: "refused: missing or wrong CSRF token; reload the page"})
			return
		}
		res, status := f(w, r)
		writeJSON(w, status, res)
	}
}

// result is the JSON answer of every action.
type result struct {
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
	// Diff is an apply's dry-run diff (unified lines).
	Diff string `json:"diff,omitempty"`
	// TurnID is the turn a send opened.
	TurnID string `json:"turnId,omitempty"`
	// Redirect tells the page where to go next (after a delete, a logout).
	Redirect string `json:"redirect,omitempty"`
}

func ok(msg string) (result, int) { return result{OK: true, Message: msg}, http.StatusOK }

func fail(status int, msg string) (result, int) { return result{Error: msg}, status }

func (c *Console) logout(w http.ResponseWriter, r *http.Request) (result, int) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.sessions.end(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	return result{OK: true, Message: "logged out", Redirect: "/ui/login"}, http.StatusOK
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
