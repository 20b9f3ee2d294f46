package daemon

import (
	"log/slog"

	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// dropUnownedTokens revokes, before the controllers launch any pane, every
// worker token that no ownership record holds: tokens of panes whose record
// was lost (their tabs are closed as orphans), of launches that never got
// their pane recorded, or left in the state database by a revocation that
// did not reach the disk. A record names its token by handle; one written before
// fleetd kept the handle names it by member and pane id. Tokens of recorded
// panes that ended while fleetd was down are released by the reconciler
// once herdr has been listed.
func dropUnownedTokens(toks *tokens.Registry, owned []controllers.Ownership, log *slog.Logger) {
	type memberPane struct{ member, pane string }
	ids := map[tokens.ID]bool{}
	panes := map[memberPane]bool{}
	for _, o := range owned {
		if o.Token != "" {
			ids[tokens.ID(o.Token)] = true
		} else if o.PaneID != "" {
			panes[memberPane{o.Member, o.PaneID}] = true
		}
	}
	n := toks.Retain(func(id tokens.ID, i tokens.Identity) bool {
		return ids[id] || panes[memberPane{i.Member, i.PaneID}] // only recorded panes are keys
	})
	if n > 0 {
		log.Info("revoked worker tokens that no pane fleetd owns holds", "count", n)
	}
}
