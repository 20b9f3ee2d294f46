package etcdstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The fleet's primary token. One token authenticates the primary at every
// node's gateway; etcd holds only its SHA-256 hash, at PREFIX/tokens/primary,
// with the node that minted it (which keeps the token itself in its
// STATE_DIR/primary.token). The first node to start in a fleet without one
// claims it ([Store.ClaimPrimaryToken], create-if-absent); every Store reads
// it in its list and watch of the prefix ([Store.PrimaryToken]), so a change
// reaches every node without a restart.

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

// tokenEntry is the token key as last read.
type tokenEntry struct {
	modRev int64
	token  *FleetToken // nil when the value does not decode
}

func (s *Store) tokenKey() string { return s.prefix + "tokens/primary" }

// decodeToken decodes the fleet's token hash; nil for a key that is not it.
func (s *Store) decodeToken(key string, value []byte, modRev int64, prev *tokenEntry) *tokenEntry {
	if key != s.tokenKey() {
		return nil
	}
	if prev != nil && prev.modRev == modRev {
		return prev
	}
	e := &tokenEntry{modRev: modRev}
	t, err := decodeFleetToken(value)
	if err != nil {
		s.log.Error("etcd holds a primary token hash that does not decode; the last one read stays in effect", "key", key, "err", err)
		return e
	}
	e.token = &t
	return e
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

// publishToken installs the token hash from tokenKV. A key that is gone
// or does not decode leaves the last good hash in effect: a node never
// falls back to accepting a token the fleet did not choose.
func (s *Store) publishToken() {
	if s.tokenKV == nil || s.tokenKV.token == nil {
		return
	}
	t := *s.tokenKV.token
	s.mu.Lock()
	defer s.mu.Unlock()
	if t == s.primary {
		return
	}
	s.primary = t
	close(s.tokenCh)
	s.tokenCh = make(chan struct{})
}

// PrimaryToken returns the fleet's primary token hash as last listed or
// watched; false before one was read. It never waits on etcd.
func (s *Store) PrimaryToken() (FleetToken, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.primary, s.primary.SHA256 != ""
}

// PrimaryTokenChanged returns a channel closed at the next change of the
// fleet's primary token hash.
func (s *Store) PrimaryTokenChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenCh
}

// ClaimPrimaryToken makes want the fleet's primary token hash unless the
// fleet has one: a create-if-absent transaction. It returns the fleet's
// hash — want if the claim won, the one etcd holds otherwise. Nothing but
// the hash is written.
func (s *Store) ClaimPrimaryToken(ctx context.Context, want FleetToken) (FleetToken, error) {
	if err := want.check(); err != nil {
		return FleetToken{}, fmt.Errorf("claim the fleet's primary token: %w", err)
	}
	value, err := json.Marshal(want)
	if err != nil {
		return FleetToken{}, err
	}
	key := s.tokenKey()
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return FleetToken{}, fmt.Errorf("claim the fleet's primary token: %w: %w", ErrUnavailable, err)
	}
	if resp.Succeeded {
		return want, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return FleetToken{}, fmt.Errorf("claim the fleet's primary token: %s exists but could not be read", key)
	}
	got, err := decodeFleetToken(kvs[0].Value)
	if err != nil {
		return FleetToken{}, fmt.Errorf("the fleet's primary token hash at %s does not decode (%w); fix or delete the key", key, err)
	}
	return got, nil
}
