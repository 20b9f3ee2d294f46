package etcdstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// The fence: how a node tells the etcd it reads from the fleet it
// belongs to. etcd restored empty, or from an older backup, answers every
// request as a healthy etcd does — and a store that believed it would
// prune every agent of the node at once. Two facts tell it apart:
//
//   - The fleet's identity, PREFIX/identity: written once, by the first
//     node of the fleet (create-if-absent), and remembered by every node.
//     Missing, or another fleet's, and this etcd is not the fleet's.
//   - etcd's revision never goes back; only a restore takes it back. The
//     highest revision a node has seen is remembered; an etcd behind it was
//     restored from an older backup.
//
// Both are remembered in the state directory (etcd-store.json, with every
// object's last good definition and the node's members, which a value that
// fails to decode at the first list after a restart keeps, and which are
// the prune hold's baseline). They are checked before the first list
// (Sync), whenever a list comes back at a revision below the highest seen,
// every Options.CheckInterval, and before every write; the identity is also
// watched. A store that fails the check is lost (store.ErrLost): its
// snapshot stays the last one in effect, Stale and Unreadable with the
// reason, and every write is refused, until an operator accepts the etcd as
// it is — fleetd stopped, `fleetd store accept` ([Accept]), fleetd started.

// identityKey is the fleet identity's key under the prefix.
const identityKey = "identity"

// DefaultCheckInterval is how often a running store compares etcd's
// identity and revision with what it has seen.
const DefaultCheckInterval = 30 * time.Second

// persistEvery spaces the writes of etcd-store.json: changes within it are
// written together.
const persistEvery = time.Second

// identity is the value at PREFIX/identity.
type identity struct {
	Fleet   string    `json:"fleet"`
	Created time.Time `json:"created"`
}

// fleetOf reads an identity value: the fleet's id, or a description of a
// value that is none (which no remembered id equals).
func fleetOf(value []byte) string {
	var id identity
	if json.Unmarshal(value, &id) != nil || id.Fleet == "" {
		return fmt.Sprintf("(an identity that does not decode: %.40q)", value)
	}
	return id.Fleet
}

// memory is what a node remembers of its fleet across restarts: the file
// statedir names EtcdStore.
type memory struct {
	// Prefix is the fleet's prefix: a memory of another prefix is not
	// this fleet's.
	Prefix string `json:"prefix"`
	// Identity is the fleet's id; "" until the node first read it, and
	// after an operator accepted a lost etcd.
	Identity string `json:"identity,omitempty"`
	// Revision is the highest etcd revision the node has seen.
	Revision int64 `json:"revision,omitempty"`
	// Lost says why the node found etcd lost; "" while it is not.
	Lost string `json:"lost,omitempty"`
	// Objects are every object's last good definition, by etcd key.
	Objects map[string]json.RawMessage `json:"objects,omitempty"`
	// Members are the members in effect on the node, by name.
	Members []string `json:"members,omitempty"`
}

// loadMemory reads the node's memory of the fleet under prefix; an empty
// one when there is none, or it is another prefix's.
func loadMemory(path, prefix string) (*memory, error) {
	fresh := &memory{Prefix: prefix}
	if path == "" {
		return fresh, nil
	}
	data, err := statedir.ReadFile(path, statedir.MaxIndexBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return fresh, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read what this node remembers of its fleet: %w", err)
	}
	var m memory
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("read what this node remembers of its fleet: %s: %w", path, err)
	}
	if m.Prefix != prefix {
		return fresh, nil
	}
	return &m, nil
}

// saved decodes the remembered objects by key; one that does not decode
// is left out.
func (m *memory) saved(prefix string) map[string]v1alpha1.Object {
	out := make(map[string]v1alpha1.Object, len(m.Objects))
	for key, raw := range m.Objects {
		kind, _, ok := kindOfKey(prefix, key)
		if !ok {
			continue
		}
		if obj, err := store.UnmarshalObject(kind, raw); err == nil {
			out[key] = obj
		}
	}
	return out
}

// kindOfKey returns the kind and name of an object key under prefix (with
// its trailing slash).
func kindOfKey(prefix, key string) (kind, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", "", false
	}
	dir, name, _ := strings.Cut(rest, "/")
	for k, d := range kindDirs {
		if d == dir && name != "" && !strings.Contains(name, "/") {
			return k, name, true
		}
	}
	return "", "", false
}

// remembered is a snapshot of the remembered objects for which keep
// holds; nil when nothing is remembered.
func rememberedSnapshot(saved map[string]v1alpha1.Object, keep func(v1alpha1.Object) bool) *store.Snapshot {
	if len(saved) == 0 {
		return nil
	}
	s := store.NewSnapshot()
	s.Synced = true
	for key, obj := range saved {
		if keep(obj) {
			s.Put(obj, key)
		}
	}
	return s
}

// identityKey is the key of the fleet's identity.
func (s *Store) identityKey() string { return s.prefix + identityKey }

// decodeIdentity reads the identity key: the fleet's id; ok is false for
// any other key under PREFIX/identity.
func (s *Store) decodeIdentity(kv *mvccpb.KeyValue, _ string, _ bool) (string, bool) {
	if string(kv.Key) != s.identityKey() {
		return "", false
	}
	return fleetOf(kv.Value), true
}

// probe is what etcd says of the fleet at one revision.
type probe struct {
	present bool   // the identity key exists
	fleet   string // its fleet id
	value   []byte // its value as etcd holds it
	modRev  int64  // the revision it was written at
	rev     int64  // etcd's revision when it answered
}

func probeOf(kv *mvccpb.KeyValue, rev int64) probe {
	if kv == nil {
		return probe{rev: rev}
	}
	return probe{present: true, fleet: fleetOf(kv.Value), value: kv.Value, modRev: kv.ModRevision, rev: rev}
}

// known is what a node knew of its fleet before it sent a probe: the
// fleet's id ("" for none yet) and the highest revision seen (a
// linearizable read of the same etcd answers at least that).
type known struct {
	fleet string
	seen  int64
}

// known returns what the node knows now, to judge a probe sent next.
func (s *Store) known() known {
	s.mu.Lock()
	defer s.mu.Unlock()
	return known{fleet: s.fleetID, seen: s.seen}
}

// judge compares a probe with what the node knew before it was sent, and
// returns the store's lost error, or nil.
func (s *Store) judge(p probe, k known) error {
	want, before := k.fleet, k.seen
	prefix := strings.TrimSuffix(s.prefix, "/")
	switch {
	case !p.present && want != "":
		return s.lostError(fmt.Sprintf("etcd holds no fleet identity (%s), but this node belongs to fleet %s: etcd lost its data (restored empty?), or the key or the prefix was deleted",
			s.identityKey(), want))
	case p.present && want != "" && p.fleet != want:
		return s.lostError(fmt.Sprintf("etcd holds fleet %s under %s, but this node belongs to fleet %s: another etcd, or one restored from another fleet's backup",
			p.fleet, prefix, want))
	case p.rev < before:
		return s.lostError(fmt.Sprintf("etcd is at revision %d, behind revision %d this node has seen: it was restored from an older backup, or is another etcd", p.rev, before))
	}
	return nil
}

// lostError is the store's words for a lost etcd: why, and what to do.
func (s *Store) lostError(why string) error {
	dir := s.stateDir
	if dir == "" {
		dir = "DIR"
	}
	return fmt.Errorf("%w (etcd under %s): %s; this node prunes and creates nothing until the etcd is accepted as the fleet's store: "+
		"stop fleetd, run `fleetd store accept --state-dir %s`, and start it again", store.ErrLost, strings.TrimSuffix(s.prefix, "/"), why, dir)
}

// adopt records what a probe that passed says: the fleet's id (the first
// time), the identity's value (what writes are fenced on) and the
// revision.
func (s *Store) adopt(p probe) {
	s.mu.Lock()
	joined := s.fleetID == "" && p.present
	if joined {
		s.fleetID = p.fleet
	}
	if p.present {
		s.idValue, s.idModRev = p.value, p.modRev
	}
	s.seen = max(s.seen, p.rev)
	s.mu.Unlock()
	if joined {
		s.log.Info("node joined the fleet on etcd", "fleet", p.fleet, "prefix", strings.TrimSuffix(s.prefix, "/"))
	}
	s.memChanged.Notify()
}

// Lost returns why the store is lost (an error matching store.ErrLost),
// or nil.
func (s *Store) Lost() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// fence reads the fleet's identity and judges it and etcd's revision.
// With create, a fleet without an identity, joined by a node that
// remembers none, gets one (create-if-absent: the first node of a fleet
// writes it). A lost etcd makes the store lost; the error is only for an
// etcd that did not answer.
func (s *Store) fence(ctx context.Context, create bool) error {
	if s.Lost() != nil {
		return nil
	}
	before := s.known()
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(rctx, s.identityKey())
	if err != nil {
		return fmt.Errorf("read the fleet's identity: %w: %w", ErrUnavailable, err)
	}
	var kv *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		kv = resp.Kvs[0]
	}
	p := probeOf(kv, resp.Header.Revision)
	if !p.present && before.fleet == "" && create {
		if p, err = s.createIdentity(rctx); err != nil {
			return err
		}
	}
	if lost := s.judge(p, before); lost != nil {
		s.markLost(lost)
		return nil
	}
	s.adopt(p)
	return nil
}

// createIdentity writes the fleet's identity unless another node wrote
// one first, and returns what etcd then holds.
func (s *Store) createIdentity(ctx context.Context) (probe, error) {
	value, _ := json.Marshal(identity{Fleet: store.NewUID(), Created: s.clock.Now().UTC().Truncate(time.Second)}) // plain data: cannot fail
	key := s.identityKey()
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return probe{}, fmt.Errorf("write the fleet's identity: %w: %w", ErrUnavailable, err)
	}
	if resp.Succeeded {
		s.log.Info("new fleet on etcd: wrote its identity", "key", key, "fleet", fleetOf(value))
		return probe{present: true, fleet: fleetOf(value), value: value, modRev: resp.Header.Revision, rev: resp.Header.Revision}, nil
	}
	var kv *mvccpb.KeyValue
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		kv = kvs[0]
	}
	return probeOf(kv, resp.Header.Revision), nil
}

// checkRebuilt judges what the informers just read, with s.buildMu held:
// the identity as watched (once the items read reach the identity the
// node adopted: before, they may not show it yet; a watch that caught up
// late brings its write and its delete in one change), and — when a list came
// back at a revision below the highest seen — a probe of etcd (a list may
// legitimately be older than an event another informer saw after it was
// served; a probe sent now may not). Then the highest revision seen moves
// up.
func (s *Store) checkRebuilt() {
	if s.Lost() != nil {
		return
	}
	s.mu.Lock()
	k, idRev := known{fleet: s.fleetID, seen: s.seen}, s.idModRev
	s.mu.Unlock()
	if it, ok, at := s.identity.Lookup(s.identityKey()); k.fleet != "" && idRev > 0 && at >= idRev && s.identity.Stale() == nil {
		if !ok || it.Value != k.fleet {
			s.enterLost(s.judge(probe{present: ok, fleet: it.Value, rev: k.seen}, k))
			return
		}
	}
	suspect := false
	var top int64
	for i, sp := range s.spaces() {
		if l := sp.Listed(); l != s.listed[i] {
			s.listed[i] = l
			suspect = suspect || l < k.seen
		}
		top = max(top, sp.Revision())
	}
	if suspect {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		before := s.known()
		resp, err := s.cli.Get(ctx, s.identityKey())
		cancel()
		if err != nil {
			s.log.Warn("cannot confirm a list of etcd below the highest revision seen; the next check will", "err", err)
			return
		}
		var kv *mvccpb.KeyValue
		if len(resp.Kvs) > 0 {
			kv = resp.Kvs[0]
		}
		if lost := s.judge(probeOf(kv, resp.Header.Revision), before); lost != nil {
			s.enterLost(lost)
			return
		}
	}
	s.mu.Lock()
	moved := top > s.seen
	s.seen = max(s.seen, top)
	s.mu.Unlock()
	if moved {
		s.memChanged.Notify()
	}
}

// markLost makes the store lost for err and publishes the snapshot in
// effect as lost.
func (s *Store) markLost(err error) {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	if s.Lost() == nil {
		s.enterLost(err)
		s.publish()
	}
}

// enterLost makes the store lost for err, with s.buildMu held: the
// snapshots in effect — the node's (before the hold) and the fleet's; after
// a restart, the remembered ones — are frozen until an operator accepts
// the etcd.
func (s *Store) enterLost(err error) {
	frozen := s.hold.Input()
	s.mu.Lock()
	if !frozen.Synced {
		frozen = cmp.Or(s.base, store.NewSnapshot())
	}
	if !s.full.Synced {
		s.full = cmp.Or(s.baseFull, store.NewSnapshot())
	}
	s.lost, s.frozen = err, frozen
	s.mu.Unlock()
	s.log.Error("etcd is not the fleet this node knew; pruning and creating nothing until it is accepted", "err", err)
	s.memChanged.Notify()
}

// checkLoop fences the store every Options.CheckInterval until ctx ends:
// a node whose etcd was replaced under it (restored, its watch resumed on
// the new one without an error) finds out within an interval.
func (s *Store) checkLoop(ctx context.Context) {
	for {
		if err := s.fence(ctx, true); err != nil && ctx.Err() == nil {
			s.log.Debug("fleet identity check", "err", err)
		}
		if s.Lost() != nil || !clock.Sleep(ctx, s.clock, s.checkEvery) {
			return
		}
	}
}

// persistLoop writes what the node remembers of its fleet after every
// change, at most every persistEvery, and once more when ctx ends.
func (s *Store) persistLoop(ctx context.Context) {
	if s.stateFile == "" {
		return
	}
	var written []byte
	var lastErr string
	encoded := map[v1alpha1.Object]json.RawMessage{}
	for {
		changed := s.memChanged.Changed()
		last := ctx.Err() != nil // what is written now is the final state
		var data []byte
		var err error
		data, encoded, err = s.remembered(encoded)
		if err == nil && !bytes.Equal(data, written) {
			if err = s.writeMemory(data); err == nil {
				written = data
			}
		}
		if err != nil && err.Error() != lastErr {
			s.log.Error("cannot persist what this node remembers of its fleet; a restart may not recognise a lost etcd", "err", err)
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
		if last {
			return
		}
		select {
		case <-ctx.Done():
		case <-changed:
			clock.Sleep(ctx, s.clock, persistEvery)
		}
	}
}

// remembered encodes what the node remembers now: the fleet, the
// revision, and the objects in effect — the whole fleet's as etcd holds
// them and the node's own as published (held members too); while lost,
// only the frozen ones. encoded are the objects' encodings as the last
// call made them, by object (a snapshot keeps an unchanged object's
// pointer): only the objects that changed are encoded again, and next are
// the encodings of this call's objects.
func (s *Store) remembered(encoded map[v1alpha1.Object]json.RawMessage) (_ []byte, next map[v1alpha1.Object]json.RawMessage, _ error) {
	s.mu.Lock()
	m := memory{Prefix: strings.TrimSuffix(s.prefix, "/"), Identity: s.fleetID, Revision: s.seen, Objects: map[string]json.RawMessage{}}
	full := s.full
	if s.lost != nil {
		m.Lost, full = s.lost.Error(), nil
	}
	s.mu.Unlock()
	node := s.Snapshot()
	next = make(map[v1alpha1.Object]json.RawMessage, len(encoded))
	for _, snap := range []*store.Snapshot{full, node} {
		if snap == nil || !snap.Synced {
			continue
		}
		for k, source := range snap.Sources {
			obj, _ := snap.Object(k)
			raw, ok := encoded[obj]
			if !ok {
				var err error
				if raw, err = json.Marshal(obj); err != nil {
					return nil, encoded, fmt.Errorf("encode %s: %w", k, err)
				}
			}
			next[obj] = raw
			m.Objects[source] = raw
		}
	}
	m.Members = slices.Sorted(maps.Keys(node.Members))
	data, err := json.Marshal(m)
	return data, next, err
}

func (s *Store) writeMemory(data []byte) error {
	if err := statedir.At(s.stateDir).Create(); err != nil {
		return err
	}
	return atomicfile.Write(s.stateFile, append(data, '\n'), statedir.FileMode)
}

// Accepted is what [Accept] made the node forget.
type Accepted struct {
	// Identity is the fleet the node belonged to; Revision the highest
	// revision it had seen.
	Identity string
	Revision int64
	// Lost is why the node had found etcd lost; "" if it had not.
	Lost string
}

// Accept makes the node whose state directory is stateDir accept, at its
// next start, the etcd it then finds as its fleet's store: it forgets the
// fleet identity and the highest revision it remembers (keeping the
// objects, the prune hold's baseline: members the accepted etcd lacks are
// held, not pruned at once). The caller holds the state directory's lock
// (fleetd is stopped). It fails when the node remembers no fleet.
func Accept(stateDir string) (Accepted, error) {
	path := statedir.At(stateDir).EtcdStore()
	data, err := statedir.ReadFile(path, statedir.MaxIndexBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Accepted{}, fmt.Errorf("%s does not exist: this node remembers no fleet on etcd, so there is nothing to accept (is --state-dir the node's?)", path)
	}
	if err != nil {
		return Accepted{}, err
	}
	var m map[string]json.RawMessage // every field kept as it is, but three
	if err := json.Unmarshal(data, &m); err != nil {
		return Accepted{}, fmt.Errorf("read %s: %w", path, err)
	}
	var was memory
	if err := json.Unmarshal(data, &was); err != nil {
		return Accepted{}, fmt.Errorf("read %s: %w", path, err)
	}
	if was.Identity == "" && was.Revision == 0 && was.Lost == "" {
		return Accepted{}, fmt.Errorf("this node remembers no fleet identity or revision (%s): it accepts the etcd it finds at its next start already", path)
	}
	delete(m, "identity")
	delete(m, "revision")
	delete(m, "lost")
	out, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return Accepted{}, fmt.Errorf("encode %s: %w", path, err)
	}
	if err := atomicfile.Write(path, append(out, '\n'), statedir.FileMode); err != nil {
		return Accepted{}, err
	}
	return Accepted{Identity: was.Identity, Revision: was.Revision, Lost: was.Lost}, nil
}
