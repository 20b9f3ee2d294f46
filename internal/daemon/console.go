package daemon

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/console"
	"github.com/fleetd-dev/fleetd/internal/messaging/herdrprompt"
	"github.com/fleetd-dev/fleetd/internal/quota"
	"github.com/fleetd-dev/fleetd/internal/tokens"
	"github.com/fleetd-dev/fleetd/mcp"
)

// ConsoleOptions tune the browser console; a zero field means the
// console's default.
type ConsoleOptions struct {
	// Clock times login codes and sessions (tests expire them); nil is the
	// wall clock.
	Clock           clock.Clock
	CodeTTL         time.Duration
	SessionIdle     time.Duration
	SessionLifetime time.Duration
}

// newConsole builds the browser console on the controllers, the messaging
// the gateway uses (the core, or the relay across nodes, which answers
// another node's member's status with what its node publishes) and its
// token registry. With a fleet view (a fleet on etcd) it lists every
// node's members, with the status their nodes publish.
func newConsole(mgr *controllers.Manager, view *fleetView, messages console.Messenger, toks *tokens.Registry, prompter *herdrprompt.Prompter, holds *quota.Quota, cfg Config, log *slog.Logger) (*console.Console, error) {
	var members console.Members = mgr
	if view != nil {
		members = view
	}
	o := console.Options{
		Node:        nodeName(cfg),
		Members:     members,
		Messages:    messages,
		Store:       mgr.Store(),
		Tokens:      toks,
		Tails:       prompter,
		PrimaryName: mcp.PrimaryName,
		Holds:       holds,
		Logger:      log,
		Herdr: func() error {
			if !mgr.HerdrSynced() {
				return errors.New("fleetd's view of herdr is not in sync; is herdr running?")
			}
			return nil
		},
	}
	if cfg.Console != nil {
		o.Clock, o.CodeTTL, o.SessionIdle, o.SessionLifetime = cfg.Console.Clock, cfg.Console.CodeTTL, cfg.Console.SessionIdle, cfg.Console.SessionLifetime
	}
	return console.New(o)
}

// withConsole serves the console at /ui and everything else from api. On a
// loopback listener the console gets the API's Host check too.
func withConsole(api, ui http.Handler, loopback bool) http.Handler {
	if loopback {
		ui = mcp.LoopbackHostOnly(ui)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == console.Prefix || strings.HasPrefix(r.URL.Path, console.Prefix+"/") {
			ui.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
