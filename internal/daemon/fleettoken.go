package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// One primary token for a fleet on etcd. etcd holds its SHA-256 hash
// (PREFIX/tokens/primary) and the node that minted it; that node's
// STATE_DIR/primary.token holds the token. Every node's gateway accepts
// that token alone as the primary's; worker tokens stay each node's own.

// adoptFleetToken makes toks accept the fleet's primary token, before the
// gateway serves: the one whose hash st read from etcd, or — in a fleet
// that has none yet — this node's own primary.token (minted now if there
// is none), whose hash it claims with a create-if-absent transaction. A
// node whose own primary.token is not the fleet's keeps the file as it is
// and says, once, where the fleet's token is.
func adoptFleetToken(ctx context.Context, st *etcdstore.Store, toks *tokens.Registry, state statedir.Layout, node string, log *slog.Logger) error {
	own, err := tokens.ReadPrimaryToken(state.Root())
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return err
	}
	fleet, ok := st.PrimaryToken()
	if !ok {
		if missing {
			if own, err = tokens.PrimaryToken(state.Root()); err != nil {
				return err
			}
			missing = false
		}
		if fleet, err = st.ClaimPrimaryToken(ctx, etcdstore.FleetToken{SHA256: string(tokens.IDOf(own)), Node: node}); err != nil {
			return err
		}
	}
	if err := toks.AcceptPrimary(tokens.ID(fleet.SHA256)); err != nil {
		return fmt.Errorf("the fleet's primary token hash: %w", err)
	}
	explainFleetToken(fleet, own, missing, state, node, log)
	return nil
}

// explainFleetToken logs which primary token this node accepts when it is
// not the one in its own primary.token. No token is logged.
func explainFleetToken(fleet etcdstore.FleetToken, own string, missing bool, state statedir.Layout, node string, log *slog.Logger) {
	switch {
	case !missing && tokens.SameID(tokens.IDOf(own), tokens.ID(fleet.SHA256)):
		log.Info("this node accepts the fleet's primary token, the one in its primary.token", "minted_by", fleet.Node)
	case fleet.Node == node:
		log.Warn("this node accepts only the fleet's primary token, which etcd says this node minted, but its primary.token is not that token (replaced since?); "+
			"put the fleet's token back in it (mode 0600), or delete the hash in etcd and restart this node to make its token the fleet's",
			"primary_token", state.PrimaryToken(), "minted_by", fleet.Node)
	default:
		what := "this node's own primary.token is a different token and is not accepted"
		if missing {
			what = "this node has no primary.token"
		}
		log.Warn("this node accepts only the fleet's primary token, minted by node "+fleet.Node+" (`fleetd mcp-config` there prints it); "+what+
			"; to use the token on this node too, copy that node's STATE_DIR/primary.token here (mode 0600)",
			"primary_token", state.PrimaryToken(), "minted_by", fleet.Node)
	}
}

// followFleetToken makes toks accept the fleet's primary token whenever
// its hash in etcd changes, until ctx ends. A hash that is deleted or does
// not decode leaves the last one in effect (the store keeps it).
func followFleetToken(ctx context.Context, st *etcdstore.Store, toks *tokens.Registry, log *slog.Logger) {
	for {
		ch := st.PrimaryTokenChanged()
		if t, ok := st.PrimaryToken(); ok && !tokens.SameID(tokens.ID(t.SHA256), toks.PrimaryID()) {
			if err := toks.AcceptPrimary(tokens.ID(t.SHA256)); err != nil {
				log.Error("the fleet's primary token hash changed to one that is not valid; the previous one stays in effect", "err", err)
			} else {
				log.Info("the fleet's primary token changed; this node accepts the new one", "minted_by", t.Node)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}
