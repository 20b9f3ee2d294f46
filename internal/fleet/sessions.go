package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcd/informer"
	"github.com/fleetd-dev/fleetd/internal/retry"
)

// Agent sessions across nodes. The agent's own session of each member
// (herdr's agent_session: the conversation its harness can reopen) is kept
// at PREFIX/sessions/MEMBER — a [KeptSession]: the member's uid and the
// session, never a secret — written by the node that runs the member when
// it changes ([Sessions.Keep], in the background) and read by every node
// with an informer ([Sessions.Session]), so that a member the scheduler
// moves to another node (its node lost, its placement changed) resumes
// its agent's session there, where that node's harness can read it (a
// home directory the nodes share, a harness that keeps its sessions on a
// server). The key is under no lease: it outlives the node that wrote it.
// A member deleted leaves its key behind; one declared again under the
// same name has another uid and resumes nothing of it.

// DefaultMaxSessionBytes bounds one kept session, written or read.
const DefaultMaxSessionBytes = 4 << 10

// KeptSession is the value at PREFIX/sessions/MEMBER.
type KeptSession struct {
	MemberUID string                `json:"memberUID"`
	Session   v1alpha1.AgentSession `json:"session"`
}

// sessionKey is the key of a member's kept session in a fleet under prefix.
func sessionKey(prefix, member string) string { return prefix + "/sessions/" + member }

// Sessions are the fleet's kept agent sessions as this node reads and
// writes them. It implements controllers.SessionKeeper.
type Sessions struct {
	cli    *clientv3.Client
	inf    *informer.Informer[*KeptSession] // a nil value does not decode
	prefix string
	o      Options

	mu   sync.Mutex
	want map[string]*KeptSession // writes Keep asked for, by member; nil deletes
	wake chan struct{}
}

// NewSessions returns the fleet's kept sessions as read and written
// through cli; nothing is read until Sync or Run.
func NewSessions(cli *clientv3.Client, opts *Options) *Sessions {
	o := opts.withDefaults()
	s := &Sessions{cli: cli, prefix: o.Prefix, o: o, want: map[string]*KeptSession{}, wake: make(chan struct{}, 1)}
	s.inf = informer.New(informer.Options[*KeptSession]{
		Client: cli, Prefix: sessionKey(o.Prefix, ""), Name: "agent sessions", Decode: s.decode,
		RequestTimeout: o.RequestTimeout, RetryInterval: o.RetryInterval, Clock: o.Clock, Logger: o.Logger,
	})
	return s
}

// Sync reads the sessions once, before Run.
func (s *Sessions) Sync(ctx context.Context) error { return s.inf.Sync(ctx) }

// Changed returns a channel closed at the next change of the kept
// sessions as read.
func (s *Sessions) Changed() <-chan struct{} { return s.inf.Changed() }

// Run follows the sessions, and writes what Keep asked for, until ctx
// ends; it returns nil.
func (s *Sessions) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.inf.Run(ctx) })
	wg.Go(func() { s.write(ctx) })
	wg.Wait()
	return nil
}

func (s *Sessions) decode(kv *mvccpb.KeyValue, _ *KeptSession, _ bool) (*KeptSession, bool) {
	key := string(kv.Key)
	if name := strings.TrimPrefix(key, sessionKey(s.prefix, "")); name == "" || strings.Contains(name, "/") {
		return nil, false
	}
	k, err := decodeKept(kv.Value)
	if err != nil {
		s.o.Logger.Error("etcd holds an agent session that does not decode; it is not resumed", "key", key, "err", err)
		return nil, true
	}
	return k, true
}

func decodeKept(value []byte) (*KeptSession, error) {
	if len(value) > DefaultMaxSessionBytes {
		return nil, fmt.Errorf("%d bytes, over the limit of %d", len(value), DefaultMaxSessionBytes)
	}
	var k KeptSession
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&k); err != nil {
		return nil, err
	}
	if k.MemberUID == "" || k.Session.Value == "" {
		return nil, fmt.Errorf("no memberUID or no session value")
	}
	return &k, nil
}

// Session returns the session kept for member name when it is of the
// member with uid, as last listed or watched. It never waits on etcd.
func (s *Sessions) Session(member, uid string) (v1alpha1.AgentSession, bool) {
	it, ok := s.inf.Get(sessionKey(s.prefix, member))
	if !ok || it.Value == nil || it.Value.MemberUID != uid {
		return v1alpha1.AgentSession{}, false
	}
	return it.Value.Session, true
}

// Keep asks for member's kept session to be sess (nil: none) for the
// member with uid. It never blocks: Run writes it in the background, only
// when etcd holds something else, and retries with backoff while etcd
// does not answer; a later Keep of the same member replaces an earlier one
// not yet written. A nil sess deletes only a session of uid's.
func (s *Sessions) Keep(member, uid string, sess *v1alpha1.AgentSession) {
	var k *KeptSession
	if sess != nil {
		k = &KeptSession{MemberUID: uid, Session: *sess}
	} else {
		k = &KeptSession{MemberUID: uid} // a deletion of uid's session
	}
	s.mu.Lock()
	s.want[member] = k
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// write makes etcd hold what Keep asked for, until ctx ends.
func (s *Sessions) write(ctx context.Context) {
	retry.New(s.o.RetryInterval, s.o.Clock).OnWake(ctx, s.wake, s.writeAll)
}

// writeAll writes every session Keep asked for; failed says some could
// not be written (they stay asked for).
func (s *Sessions) writeAll(ctx context.Context) (failed bool) {
	s.mu.Lock()
	want := maps.Clone(s.want)
	s.mu.Unlock()
	for member, k := range want {
		if err := s.put(ctx, member, k); err != nil {
			failed = true
			s.o.Logger.Warn("could not keep a member's agent session in etcd; retrying", "member", member, "err", err)
			continue
		}
		s.mu.Lock()
		if s.want[member] == k { // not replaced meanwhile
			delete(s.want, member)
		}
		s.mu.Unlock()
	}
	return failed
}

// put writes k (a session, or the deletion of k.MemberUID's) at member's
// key unless etcd holds it already.
func (s *Sessions) put(ctx context.Context, member string, k *KeptSession) error {
	key := sessionKey(s.prefix, member)
	it, held := s.inf.Get(key)
	rctx, cancel := context.WithTimeout(ctx, s.o.RequestTimeout)
	defer cancel()
	if k.Session.Value == "" {
		if !held || it.Value == nil || it.Value.MemberUID != k.MemberUID {
			return nil // nothing of uid's to delete
		}
		_, err := s.cli.Delete(rctx, key)
		return err
	}
	if held && it.Value != nil && *it.Value == *k {
		return nil
	}
	value, err := json.Marshal(k)
	if err != nil {
		return err
	}
	_, err = s.cli.Put(rctx, key, string(value))
	return err
}
