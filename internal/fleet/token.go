package fleet

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/internal/etcd/informer"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// The fleet's primary token. One token authenticates the primary at every
// node's gateway; etcd holds only its SHA-256 hash, at
// PREFIX/tokens/primary, with the node that minted it (which keeps the
// token itself in its STATE_DIR/primary.token). The first node to start in
// a fleet without one claims it ([Token.Claim], create-if-absent); every
// node reads it with an informer ([Token.Primary]), so a change reaches
// every node without a restart. Worker tokens stay each node's own.

// FleetToken is the value at PREFIX/tokens/primary.
type FleetToken struct {
	// SHA256 is the hex SHA-256 of the primary token (tokens.ID).
	SHA256 string `json:"sha256"`
	// Node is the node that minted it, whose primary.token holds it.
	Node string `json:"node"`
}

func (t FleetToken) check() error {
	if b, err := hex.DecodeString(t.SHA256); err != nil || len(b) != 32 {
		return fmt.Errorf("sha256 %q: want 64 hex digits", t.SHA256)
	}
	if err := CheckNodeName(t.Node); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return nil
}

func decodeFleetToken(value []byte) (FleetToken, error) {
	var t FleetToken
	if len(value) > 1024 {
		return t, fmt.Errorf("%d bytes; a token hash is far shorter", len(value))
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return t, err
	}
	t.SHA256 = strings.ToLower(t.SHA256)
	return t, t.check()
}

// Token is the fleet's primary token hash as this node reads it.
type Token struct {
	cli *clientv3.Client
	key string // PREFIX/tokens/primary
	inf *informer.Informer[*FleetToken]
	o   Options

	mu      sync.Mutex
	primary FleetToken // the last good hash read
	changed notify.Signal
}

// NewToken returns the fleet's token hash as read through cli; nothing is
// read until Sync or Run.
func NewToken(cli *clientv3.Client, opts *Options) *Token {
	o := opts.withDefaults()
	t := &Token{cli: cli, key: o.Prefix + "/tokens/primary", o: o}
	t.inf = informer.New(informer.Options[*FleetToken]{
		Client: cli, Prefix: o.Prefix + "/tokens/", Name: "the fleet's primary token", Decode: t.decode, OnChange: t.update,
		RequestTimeout: o.RequestTimeout, RetryInterval: o.RetryInterval, Clock: o.Clock, Logger: o.Logger,
	})
	return t
}

// Sync reads the hash once, before Run.
func (t *Token) Sync(ctx context.Context) error { return t.inf.Sync(ctx) }

// Run follows the hash until ctx ends; it returns nil.
func (t *Token) Run(ctx context.Context) error { return t.inf.Run(ctx) }

func (t *Token) decode(kv *mvccpb.KeyValue, _ *FleetToken, _ bool) (*FleetToken, bool) {
	if string(kv.Key) != t.key {
		return nil, false
	}
	tok, err := decodeFleetToken(kv.Value)
	if err != nil {
		t.o.Logger.Error("etcd holds a primary token hash that does not decode; the last one read stays in effect", "key", t.key, "err", err)
		return nil, true
	}
	return &tok, true
}

// update installs the hash the informer read. A key that is gone or does
// not decode leaves the last good hash in effect: a node never falls back
// to accepting a token the fleet did not choose.
func (t *Token) update() {
	it, ok := t.inf.Get(t.key)
	if !ok || it.Value == nil {
		return
	}
	t.mu.Lock()
	same := *it.Value == t.primary
	t.primary = *it.Value
	t.mu.Unlock()
	if !same {
		t.changed.Notify()
	}
}

// Primary returns the fleet's primary token hash as last listed or
// watched; false before one was read. It never waits on etcd.
func (t *Token) Primary() (FleetToken, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.primary, t.primary.SHA256 != ""
}

// Changed returns a channel closed at the next change of the hash.
func (t *Token) Changed() <-chan struct{} { return t.changed.Changed() }

// Claim makes want the fleet's primary token hash unless the fleet has
// one: a create-if-absent transaction. It returns the fleet's hash — want
// if the claim won, the one etcd holds otherwise. Nothing but the hash is
// written.
func (t *Token) Claim(ctx context.Context, want FleetToken) (FleetToken, error) {
	if err := want.check(); err != nil {
		return FleetToken{}, fmt.Errorf("claim the fleet's primary token: %w", err)
	}
	value, err := json.Marshal(want)
	if err != nil {
		return FleetToken{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, t.o.RequestTimeout)
	defer cancel()
	resp, err := t.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", 0)).
		Then(clientv3.OpPut(t.key, string(value))).
		Else(clientv3.OpGet(t.key)).
		Commit()
	if err != nil {
		return FleetToken{}, fmt.Errorf("claim the fleet's primary token: %w: %w", etcdstore.ErrUnavailable, err)
	}
	if resp.Succeeded {
		return want, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return FleetToken{}, fmt.Errorf("claim the fleet's primary token: %s exists but could not be read", t.key)
	}
	got, err := decodeFleetToken(kvs[0].Value)
	if err != nil {
		return FleetToken{}, fmt.Errorf("the fleet's primary token hash at %s does not decode (%w); fix or delete the key", t.key, err)
	}
	return got, nil
}

// Adopt makes toks accept the fleet's primary token, before the gateway
// serves: the one whose hash this node read from etcd (Sync first), or —
// in a fleet that has none yet — this node's own primary.token (minted now
// if there is none), whose hash it claims. A node whose own primary.token
// is not the fleet's keeps the file as it is and says, once, where the
// fleet's token is.
func (t *Token) Adopt(ctx context.Context, toks *tokens.Registry, state statedir.Layout, node string) error {
	own, err := tokens.ReadPrimaryToken(state.Root())
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return err
	}
	fleet, ok := t.Primary()
	if !ok {
		minted := missing
		if minted {
			if own, err = tokens.PrimaryToken(state.Root()); err != nil {
				return err
			}
			missing = false
		}
		if fleet, err = t.Claim(ctx, FleetToken{SHA256: string(tokens.IDOf(own)), Node: node}); err != nil {
			return err
		}
		if minted && !tokens.SameID(tokens.IDOf(own), tokens.ID(fleet.SHA256)) {
			// Another node claimed first: the token minted here is not
			// the fleet's, and a CLI reading it would be refused.
			if err := os.Remove(state.PrimaryToken()); err != nil {
				return fmt.Errorf("remove the primary token this node minted, which is not the fleet's: %w", err)
			}
			own, missing = "", true
		}
	}
	if err := toks.AcceptPrimary(tokens.ID(fleet.SHA256)); err != nil {
		return fmt.Errorf("the fleet's primary token hash: %w", err)
	}
	explainFleetToken(fleet, own, missing, state, node, t.o.Logger)
	return nil
}

// explainFleetToken logs which primary token this node accepts when it is
// not the one in its own primary.token. No token is logged.
func explainFleetToken(fleet FleetToken, own string, missing bool, state statedir.Layout, node string, log *slog.Logger) {
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
		log.Warn("this node accepts only the fleet's primary token, minted by node "+fleet.Node+" (`fleetd token` there prints it); "+what+
			"; the fleetd command line on this node takes it from FLEETD_TOKEN",
			"primary_token", state.PrimaryToken(), "minted_by", fleet.Node)
	}
}

// Follow makes toks accept the fleet's primary token whenever its hash in
// etcd changes, until ctx ends. A hash that is deleted or does not decode
// leaves the last one in effect.
func (t *Token) Follow(ctx context.Context, toks *tokens.Registry) {
	for {
		ch := t.Changed()
		if tok, ok := t.Primary(); ok && !tokens.SameID(tokens.ID(tok.SHA256), toks.PrimaryID()) {
			if err := toks.AcceptPrimary(tokens.ID(tok.SHA256)); err != nil {
				t.o.Logger.Error("the fleet's primary token hash changed to one that is not valid; the previous one stays in effect", "err", err)
			} else {
				t.o.Logger.Info("the fleet's primary token changed; this node accepts the new one", "minted_by", tok.Node)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}
