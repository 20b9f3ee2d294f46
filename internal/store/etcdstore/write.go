package etcdstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// ErrUnavailable is wrapped by a write that etcd did not answer (no quorum,
// no member reachable, the request timed out): nothing is known to be
// written. It matches store.ErrUnavailable.
var ErrUnavailable = fmt.Errorf("etcd %w", store.ErrUnavailable)

// Tombstones. A member deleted through the store leaves a mark next to its
// key, PREFIX/members/.deleted/NAME, written in the same transaction as the
// delete and kept TombstoneTTL (a lease): every node's members informer
// reads the delete and the mark in one watch response, so the prune hold
// of the node that runs the member lets the delete through — it was
// explicit — while a member key deleted by hand (etcdctl del) is held when
// most of the node's members go with it. No member name starts with a dot,
// so the mark is never an object.
const tombstoneDir = ".deleted/"

// TombstoneTTL is how long the mark of a member deleted through the store
// is kept: a node that starts within it after the delete lets the removal
// through too.
const TombstoneTTL = time.Hour

// tombstoneKey is the key of a deleted member's mark.
func (s *Store) tombstoneKey(name string) string {
	return s.prefix + kindDirs[v1alpha1.KindMember] + "/" + tombstoneDir + name
}

// fenceCmps are the compares every write is made under: the fleet's
// identity as the node adopted it (fence.go), so that a write never lands
// in an etcd that is not the fleet's.
func (s *Store) fenceCmps() []clientv3.Cmp {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idValue == nil {
		return nil
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.Value(s.identityKey()), "=", string(s.idValue))}
}

// Apply writes obj's definition with a compare-and-swap on the key's
// revision: with metadata.resourceVersion set, only over that revision
// (else an error matching store.ErrConflict); without, over the revision
// it just read, reading again if another writer came in between. uid,
// generation and creationTimestamp are the store's: kept from the stored
// object, the generation bumped when the spec changes. The object is
// decoded strictly, as a manifest file is, and held to the size limit
// before anything is written; a write that would change nothing writes
// nothing. On return the snapshot reflects the write. A lost store
// (store.ErrLost) writes nothing.
func (s *Store) Apply(ctx context.Context, obj v1alpha1.Object) error {
	return s.apply(ctx, obj, true)
}

// CheckApply makes every check [Store.Apply] makes — the object decodes
// and is no secret, its resourceVersion is the stored one, it is within the
// size limit — against what etcd holds now, and writes nothing: a dry run
// (POST /members?dryRun=All).
func (s *Store) CheckApply(ctx context.Context, obj v1alpha1.Object) error {
	return s.apply(ctx, obj, false)
}

func (s *Store) apply(ctx context.Context, obj v1alpha1.Object, write bool) error {
	kind, name := obj.GetObjectKind(), obj.GetName()
	skey := store.Key{Kind: kind, Name: name}
	key, err := s.Key(kind, name)
	if err != nil {
		return fmt.Errorf("apply %s: %w", skey, err)
	}
	if err := s.Lost(); err != nil {
		return fmt.Errorf("apply %s: %w", skey, err)
	}
	var want int64 // the precondition; 0 for none
	if v := obj.GetMeta().ResourceVersion; v != "" {
		want, err = strconv.ParseInt(v, 10, 64)
		if err != nil || want <= 0 {
			return fmt.Errorf("apply %s: %w", skey, decode.ErrorList{&decode.Error{Field: "metadata.resourceVersion",
				Msg: fmt.Sprintf("%q is not a resourceVersion this store wrote (a positive revision number); leave it out to write unconditionally", v)}})
		}
	}
	// The object as it will be stored, owned metadata aside: decoded,
	// defaulted and validated like a manifest file.
	desired, err := s.validated(key, obj)
	if err != nil {
		return fmt.Errorf("apply %s: %w", skey, err)
	}
	for attempt := 1; ; attempt++ {
		cur, curRev, err := s.read(ctx, key)
		if err != nil {
			return fmt.Errorf("apply %s: %w", skey, err)
		}
		if want != 0 && want != curRev {
			return fmt.Errorf("apply %s: resourceVersion %d, but %s: %w", skey, want, describeRev(curRev), store.ErrConflict)
		}
		value, err := s.render(desired, cur)
		if err != nil {
			return fmt.Errorf("apply %s: %w", skey, err)
		}
		if cur != nil && bytes.Equal(value, cur.value) {
			if !write {
				return nil
			}
			return s.waitWritten(ctx, kind, curRev)
		}
		if len(value) > s.maxBytes {
			return fmt.Errorf("apply %s: %w", skey, decode.ErrorList{&decode.Error{File: key,
				Msg: fmt.Sprintf("the object would be %d bytes, over the limit of %d bytes on one object", len(value), s.maxBytes)}})
		}
		if !write {
			return nil
		}
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.cli.Txn(rctx).
			If(append(s.fenceCmps(), clientv3.Compare(clientv3.ModRevision(key), "=", curRev))...).
			Then(clientv3.OpPut(key, string(value))).
			Commit()
		cancel()
		if err != nil {
			return fmt.Errorf("apply %s: %w: %w", skey, ErrUnavailable, err)
		}
		if resp.Succeeded {
			return s.waitWritten(ctx, kind, resp.Header.Revision)
		}
		if want != 0 {
			return fmt.Errorf("apply %s: resourceVersion %d, but another write came first: %w", skey, want, store.ErrConflict)
		}
		if attempt == maxWriteAttempts {
			return fmt.Errorf("apply %s: changed by other writers %d times while this write was made; write again: %w", skey, attempt, store.ErrConflict)
		}
	}
}

func describeRev(rev int64) string {
	if rev == 0 {
		return "the object does not exist"
	}
	return "it is at " + strconv.FormatInt(rev, 10)
}

// Delete removes the object's key; ErrNotFound if there is none. On return
// the snapshot reflects the removal. A member leaves its tombstone; one the
// node's prune hold keeps, whose key is gone already, is pruned. A lost
// store (store.ErrLost) deletes nothing.
//
// A Profile or Tenant that a Member of the fleet references — any node's,
// as the members' informer last read them — is not deleted
// (store.InUse). The check holds at the delete itself: the delete is
// made only if no member's key changed since the revision the check read
// (a compare on the members' prefix); if one did, the check is made again
// once the informer has read that change, a bounded number of times.
func (s *Store) Delete(ctx context.Context, kind, name string) error {
	skey := store.Key{Kind: kind, Name: name}
	key, err := s.Key(kind, name)
	if err != nil {
		return fmt.Errorf("delete %s: %w", skey, err)
	}
	if kind == v1alpha1.KindMember {
		return s.deleteMember(ctx, skey, key)
	}
	membersDir := s.prefix + kindDirs[v1alpha1.KindMember] + "/"
	for attempt := 1; ; attempt++ {
		if err := s.fenced(ctx); err != nil {
			return fmt.Errorf("delete %s: %w", skey, err)
		}
		// The revision first: the snapshot read next reflects at least it,
		// so a member the check does not see fails the compare.
		rev := s.kinds[v1alpha1.KindMember].Revision()
		if err := store.InUse(skey, slices.Collect(maps.Values(s.fullSnapshot().Members))); err != nil {
			return fmt.Errorf("delete %s: %w", skey, err)
		}
		guard := append(s.fenceCmps(), clientv3.Compare(clientv3.ModRevision(membersDir), "<", rev+1).WithPrefix())
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.cli.Txn(rctx).If(guard...).Then(clientv3.OpDelete(key)).
			// On a failed compare: the member written last, whose revision
			// the informer must reach before the check is made again.
			Else(clientv3.OpGet(membersDir, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
				clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))).
			Commit()
		cancel()
		if err != nil {
			return fmt.Errorf("delete %s: %w: %w", skey, ErrUnavailable, err)
		}
		if resp.Succeeded {
			if resp.Responses[0].GetResponseDeleteRange().Deleted == 0 {
				return fmt.Errorf("delete %s: %w", skey, store.ErrNotFound)
			}
			return s.waitWritten(ctx, kind, resp.Header.Revision)
		}
		if attempt == maxWriteAttempts {
			return fmt.Errorf("delete %s: the members changed %d times while this delete checked that none references it; delete again: %w", skey, attempt, store.ErrConflict)
		}
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			if err := s.waitWritten(ctx, v1alpha1.KindMember, kvs[0].ModRevision); err != nil {
				return fmt.Errorf("delete %s: %w", skey, err)
			}
		}
	}
}

// fenced checks that etcd is still the fleet's (fence.go) before a write:
// an error for a lost store, or an etcd that did not answer.
func (s *Store) fenced(ctx context.Context) error {
	if err := s.fence(ctx, false); err != nil {
		return err
	}
	return s.Lost()
}

// deleteMember deletes a member's key and leaves its tombstone, in one
// transaction under the fence; a member the node's hold keeps, whose key
// is gone, is released.
func (s *Store) deleteMember(ctx context.Context, skey store.Key, key string) error {
	for attempt := 1; ; attempt++ {
		if err := s.fenced(ctx); err != nil {
			return fmt.Errorf("delete %s: %w", skey, err)
		}
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		lease, err := s.cli.Grant(rctx, int64(TombstoneTTL/time.Second))
		if err != nil {
			cancel()
			return fmt.Errorf("delete %s: %w: %w", skey, ErrUnavailable, err)
		}
		mark, _ := json.Marshal(map[string]time.Time{"deleted": s.clock.Now().UTC().Truncate(time.Second)}) // plain data: cannot fail
		resp, err := s.cli.Txn(rctx).If(append(s.fenceCmps(), clientv3.Compare(clientv3.CreateRevision(key), ">", 0))...).
			Then(clientv3.OpDelete(key), clientv3.OpPut(s.tombstoneKey(skey.Name), string(mark), clientv3.WithLease(lease.ID))).
			Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
			Commit()
		cancel()
		if err != nil {
			return fmt.Errorf("delete %s: %w: %w", skey, ErrUnavailable, err)
		}
		if resp.Succeeded {
			return s.waitWritten(ctx, v1alpha1.KindMember, resp.Header.Revision)
		}
		rctx, cancel = context.WithTimeout(ctx, s.timeout)
		_, _ = s.cli.Revoke(rctx, lease.ID) // its mark was not written; it would expire anyway
		cancel()
		if len(resp.Responses[0].GetResponseRange().GetKvs()) == 0 {
			if s.hold.Release(skey.Name) {
				return nil
			}
			return fmt.Errorf("delete %s: %w", skey, store.ErrNotFound)
		}
		// The key is there: the fleet's identity changed under the
		// delete, which the next fence tells.
		if attempt == maxWriteAttempts {
			return fmt.Errorf("delete %s: the fleet's identity in etcd did not match %d times; delete again: %w", skey, attempt, store.ErrConflict)
		}
	}
}

// current is the stored object a write replaces.
type current struct {
	value   []byte
	uid     string
	gen     int64
	created *time.Time
	spec    []byte // the spec as JSON, to tell whether it changes
}

// read returns the stored object at key and its revision (0 for none), by
// a linearizable read: a write never builds on a stale view. The fleet's
// identity is read with it and judged (fence.go): an etcd that is not the
// fleet's makes the store lost, and the read fails with its error.
func (s *Store) read(ctx context.Context, key string) (*current, int64, error) {
	before := s.known()
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	resp, err := s.cli.Txn(rctx).Then(clientv3.OpGet(key), clientv3.OpGet(s.identityKey())).Commit()
	cancel()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var id *mvccpb.KeyValue
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		id = kvs[0]
	}
	p := probeOf(id, resp.Header.Revision)
	if lost := s.judge(p, before); lost != nil {
		s.markLost(lost)
		return nil, 0, lost
	}
	s.adopt(p)
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, 0, nil
	}
	kv := kvs[0]
	cur := &current{value: kv.Value}
	cur.uid, cur.gen, cur.created = ownedMeta(kv.Value, kv.CreateRevision)
	// The spec as the decoder reads it (a value put by hand may be YAML);
	// one that does not decode counts as changed by any write.
	if f := decode.Manifest(key, kv.Value); len(f.Errors) == 0 && len(f.Objects) == 1 {
		if m, err := toMap(f.Objects[0]); err == nil {
			cur.spec, _ = json.Marshal(m["spec"])
		}
	}
	return cur, kv.ModRevision, nil
}

// validated renders obj without the fields the store owns and decodes it
// strictly, with defaults; a problem is a decode.ErrorList. It refuses a
// Profile env entry that looks like a credential: nothing secret goes to
// etcd.
func (s *Store) validated(key string, obj v1alpha1.Object) (map[string]any, error) {
	m, err := toMap(obj)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	f := decode.Manifest(key, data)
	if len(f.Errors) > 0 {
		return nil, f.Errors
	}
	if len(f.Objects) != 1 {
		return nil, fmt.Errorf("internal error: the rendered object decodes to %d objects", len(f.Objects))
	}
	if p, ok := f.Objects[0].(*v1alpha1.Profile); ok {
		var errs decode.ErrorList
		for _, k := range slices.Sorted(maps.Keys(p.Spec.Env)) {
			if v1alpha1.ClassifyKey(k) == v1alpha1.KeyCredential {
				errs = append(errs, &decode.Error{File: key, Field: "spec.env." + k,
					Msg: "looks like a credential, and the etcd store writes nothing secret to etcd; set it in the environment of each node's fleetd instead"})
			}
		}
		if len(errs) > 0 {
			return nil, errs
		}
	}
	return toMap(f.Objects[0])
}

// render is the value to store: desired with the owned metadata of cur
// (or new ones), the generation bumped when the spec changes.
func (s *Store) render(desired map[string]any, cur *current) ([]byte, error) {
	spec, err := json.Marshal(desired["spec"])
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	uid, gen, created := store.NewUID(), int64(1), s.clock.Now().UTC().Truncate(time.Second)
	if cur != nil {
		uid, gen = cur.uid, cur.gen
		if cur.created != nil {
			created = *cur.created
		}
		if !bytes.Equal(spec, cur.spec) {
			gen++
		}
	}
	meta, _ := desired["metadata"].(map[string]any)
	out := make(map[string]any, len(desired))
	for k, v := range desired {
		out[k] = v
	}
	md := make(map[string]any, len(meta)+3)
	for k, v := range meta {
		md[k] = v
	}
	md["uid"], md["generation"], md["creationTimestamp"] = uid, gen, created.Format(time.RFC3339)
	out["metadata"] = md
	return json.Marshal(out)
}

// toMap renders obj as JSON fields without status and without the
// metadata the store owns.
func toMap(obj v1alpha1.Object) (map[string]any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	delete(m, "status")
	m["apiVersion"] = v1alpha1.GroupVersion
	m["kind"] = obj.GetObjectKind()
	if meta, ok := m["metadata"].(map[string]any); ok {
		for _, k := range []string{"uid", "generation", "creationTimestamp", "resourceVersion"} {
			delete(meta, k)
		}
	}
	return m, nil
}
