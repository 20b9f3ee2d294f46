package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/notify"
	desired "github.com/fleetd-dev/fleetd/internal/store"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// fleet is the fake controllers, store and messaging core behind a test
// console: one lock, one change channel.
type fleet struct {
	mu       sync.Mutex
	members  map[string]v1alpha1.Member
	changed  notify.Signal
	sends    []messaging.SendRequest
	acks     []string
	turns    map[string][]messaging.TurnStatus // worker → open turns
	mail     []messaging.Message
	applied  []*v1alpha1.Member
	profiles map[string]bool
	polls    int                             // PollPage calls: one per rendering of a page
	others   map[desired.Key]v1alpha1.Object // Profiles and Tenants applied
}

func newFleet(members ...v1alpha1.Member) *fleet {
	f := &fleet{members: map[string]v1alpha1.Member{}, turns: map[string][]messaging.TurnStatus{},
		profiles: map[string]bool{"claude": true}, others: map[desired.Key]v1alpha1.Object{}}
	for _, m := range members {
		f.members[m.Name] = m
	}
	return f
}

func (f *fleet) change(edit func(f *fleet)) {
	f.mu.Lock()
	edit(f)
	f.mu.Unlock()
	f.changed.Notify()
}

func (f *fleet) Members() []v1alpha1.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []v1alpha1.Member
	for _, m := range f.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b v1alpha1.Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (f *fleet) Member(name string) (v1alpha1.Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[name]
	return m, ok
}

func (f *fleet) MemberEvents(string) []v1alpha1.Event { return nil }

func (f *fleet) Changed() <-chan struct{} { return f.changed.Changed() }

func (f *fleet) Send(_ context.Context, req messaging.SendRequest) (messaging.SendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends = append(f.sends, req)
	return messaging.SendResult{Outcome: messaging.OutcomeDispatched, TurnID: "t-1", Worker: req.To}, nil
}

func (f *fleet) Status(name string) messaging.WorkerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return messaging.WorkerStatus{Worker: name, OpenTurns: f.turns[name]}
}

func (f *fleet) Busy() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for w := range f.turns {
		out = append(out, w)
	}
	return out
}

func (f *fleet) PollPage(context.Context, string, messaging.PollRequest) (messaging.PollPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	return messaging.PollPage{Messages: append([]messaging.Message{}, f.mail...)}, nil
}

func (f *fleet) Ack(_ string, ids []string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acks = append(f.acks, ids...)
	return len(ids), nil
}

// messages is the fleet as the console's Messenger (Changed is shared).
type messages struct{ *fleet }

// store is the fleet as the console's DesiredState.
type store struct{ *fleet }

func (s store) Get(kind, name string) (v1alpha1.Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.others[desired.Key{Kind: kind, Name: name}]; ok {
		return o, true
	}
	switch kind {
	case v1alpha1.KindProfile:
		if s.profiles[name] {
			return &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: name}}, true
		}
	case v1alpha1.KindMember:
		if m, ok := s.members[name]; ok {
			return m.DeepCopy(), true
		}
	}
	return nil, false
}

// List lists the Profiles and Tenants applied (the console's apply lists
// the Tenants); Members are read through Get.
func (s store) List(kind string) []v1alpha1.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []v1alpha1.Object
	for k, o := range s.others {
		if k.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func (s store) Apply(_ context.Context, obj v1alpha1.Object) error {
	m, ok := obj.(*v1alpha1.Member)
	if !ok {
		s.change(func(f *fleet) { f.others[desired.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}] = obj })
		return nil
	}
	s.change(func(f *fleet) {
		f.applied = append(f.applied, m.DeepCopy())
		f.members[m.Name] = *m.DeepCopy()
	})
	return nil
}

func (s store) Delete(_ context.Context, kind, name string) error {
	if _, ok := s.Member(name); !ok {
		return desired.ErrNotFound
	}
	s.change(func(f *fleet) { delete(f.members, name) })
	return nil
}

const primaryToken, workerToken = "primary-secret-token", "worker-secret-token"

type fakeTokens struct{}

func (fakeTokens) Resolve(token string) (tokens.Identity, bool) {
	switch token {
	case primaryToken:
		return tokens.Identity{Role: tokens.RolePrimary}, true
	case workerToken:
		return tokens.Identity{Role: tokens.RoleWorker, Member: "w"}, true
	}
	return tokens.Identity{}, false
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// fakeTails answers ReadTail with a text that counts the reads.
type fakeTails struct {
	mu    sync.Mutex
	reads int
}

func (f *fakeTails) ReadTail(_ context.Context, target string, lines int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return fmt.Sprintf("%s: read %d of %d lines", target, f.reads, lines), nil
}

func (f *fakeTails) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func (f *fleet) pollCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls
}
