package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// unreadableStore is a store (the directory store of the scenarios) whose
// snapshots say, while set, that its source cannot be read: Unreadable,
// and Stale too when the source did not answer, as the etcd store's
// snapshots do while etcd is down.
type unreadableStore struct {
	store.Store
	mu      sync.Mutex
	err     error
	changed notify.Signal
}

func (s *unreadableStore) Snapshot() *store.Snapshot {
	snap := s.Store.Snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return snap
	}
	down := *snap
	down.Unreadable = s.err
	if errors.Is(s.err, store.ErrUnavailable) {
		down.Stale = s.err
	}
	return &down
}

// set makes the snapshots unreadable for err (nil: readable again) and
// wakes the watchers, as a store does when its snapshot changes.
func (s *unreadableStore) set(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	s.changed.Notify()
}

func (s *unreadableStore) Watch(ctx context.Context) <-chan struct{} {
	in := s.Store.Watch(ctx)
	out := make(chan struct{}, 1)
	ch := s.changed.Changed()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-in:
			case <-ch:
				ch = s.changed.Changed()
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out
}

func (s *unreadableStore) Run(ctx context.Context) error {
	return s.Store.(interface{ Run(context.Context) error }).Run(ctx)
}

// A member's ManifestValid condition names the source that cannot be read:
// etcd that does not answer is Unknown (StoreUnavailable), in the store's
// words — its definition is not at fault and nothing about a manifests
// directory is said — while a manifests directory gone is False
// (DirectoryUnreadable). Once the source is read again the member's
// definition is Parsed again.
func TestManager_ManifestValidNamesTheUnreadableSource(t *testing.T) {
	for _, tc := range []struct {
		name             string
		err              error
		status, reason   string
		says, doesNotSay string
	}{
		{"etcd unavailable", fmt.Errorf("etcd %w; keeping every object as last seen: etcdserver: no leader", store.ErrUnavailable),
			v1alpha1.ConditionUnknown, v1alpha1.ReasonStoreUnavailable, "etcd unavailable", "manifests directory"},
		{"manifests directory gone", errors.New("open /srv/manifests: no such file or directory"),
			v1alpha1.ConditionFalse, v1alpha1.ReasonDirectoryMissing, "manifests directory unreadable", "etcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
				st := &unreadableStore{}
				e.tweak = func(o *Options) {
					st.Store = o.Store
					o.Store = st
				}
				e.start()
				before := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))

				st.set(tc.err)
				ms := e.waitFor("the source's problem shown", func(ms map[string]v1alpha1.Member) bool {
					return condition(ms["alpha"], v1alpha1.ConditionManifestValid).Reason == tc.reason
				})
				c := condition(ms["alpha"], v1alpha1.ConditionManifestValid)
				if c.Status != tc.status || !strings.Contains(c.Message, tc.says) || strings.Contains(c.Message, tc.doesNotSay) {
					t.Errorf("ManifestValid %s %s %q; want %s %s saying %q, not %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.says, tc.doesNotSay)
				}
				if !e.paneAlive(before["alpha"].Status.PaneID) {
					t.Error("alpha's pane was closed while its source could not be read")
				}

				st.set(nil)
				e.waitFor("parsed again", func(ms map[string]v1alpha1.Member) bool {
					c := condition(ms["alpha"], v1alpha1.ConditionManifestValid)
					return c.Status == v1alpha1.ConditionTrue && c.Reason == v1alpha1.ReasonManifestParsed
				})
			})
		})
	}
}
