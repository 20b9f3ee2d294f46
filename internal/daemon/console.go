package daemon

import (
	"errors"
	"github.com/fleetd-dev/fleetd/internal/quota"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/console"
	"github.com/fleetd-dev/fleetd/internal/messaging/herdrprompt"
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

// newConsole builds the browser console on the controllers, the members
// the gateway shows (the controllers', or the whole fleet's with the
// status each node publishes), the desired state it writes, the messaging
// the gateway uses (the core, or the relay across nodes) and its token
// registry.
func newConsole(mgr *controllers.Manager, members console.Members, desired console.DesiredState, messages console.Messenger, toks *tokens.Registry, prompter *herdrprompt.Prompter, holds *quota.Quota, cfg Config, node string, log *slog.Logger) (*console.Console, error) {
	o := console.Options{
		Node:        node,
		Members:     members,
		Messages:    messages,
		Store:       desired,
		Tokens:      toks,
		Tails:       prompter,
		PrimaryName: mcp.PrimaryName,
		Holds:       holds,
		Logger:      log,
		Profiles:    mgr.Profiles,
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
