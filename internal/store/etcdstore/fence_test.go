package etcdstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// newCluster starts an etcd of its own for the test: one restored empty,
// or from a backup, in the place of the shared one.
func newCluster(t *testing.T) *etcdtest.Cluster {
	t.Helper()
	c, err := etcdtest.Start(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// copyKeys copies the test prefix's keys for which keep holds from one
// etcd to another, one put each: a backup restored, at the new etcd's
// (low) revisions.
func copyKeys(t *testing.T, from, to *clientv3.Client, keep func(key string) bool) {
	t.Helper()
	resp, err := from.Get(context.Background(), prefix(t)+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if keep(string(kv.Key)) {
			if _, err := to.Put(context.Background(), string(kv.Key), string(kv.Value)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// lostSaying returns whether a snapshot is lost (Stale and Unreadable,
// matching store.ErrLost) for a reason that says why.
func lostSaying(why string) func(*store.Snapshot) bool {
	return func(s *store.Snapshot) bool {
		return errors.Is(s.Stale, store.ErrLost) && errors.Is(s.Unreadable, store.ErrLost) && strings.Contains(s.Stale.Error(), why)
	}
}

// threeMembers applies the profile claude and the members alpha, beta and
// gamma through n.
func threeMembers(n *node) {
	n.t.Helper()
	n.apply(profile("claude"))
	for _, m := range []string{"alpha", "beta", "gamma"} {
		n.apply(member(m, "claude"))
	}
}

// A value that stops decoding while fleetd is stopped keeps, at the first
// list after the restart, the definition the node remembers (uid and
// generation too), with its error reported.
func TestStore_ValueBrokenWhileStoppedKeepsItsLastGoodDefinition(t *testing.T) {
	state := t.TempDir()
	n, stop := runNode(t, &Options{StateDir: state})
	n.apply(profile("claude"))
	n.apply(member("alpha", "claude"))
	edited := n.member("alpha").DeepCopy()
	edited.ResourceVersion, edited.Spec.Cwd = "", "/srv"
	n.apply(edited)
	was := n.member("alpha")
	stop()
	key := prefix(t) + "/members/alpha"
	if _, err := n.cli.Put(context.Background(), key, "spec: [oops"); err != nil {
		t.Fatal(err)
	}

	n2, _ := runNode(t, &Options{StateDir: state})
	s := n2.st.Snapshot()
	got := s.Members["alpha"]
	if got == nil || got.UID != was.UID || got.Generation != 2 || got.Spec.Cwd != "/srv" {
		t.Fatalf("after the restart alpha = %+v; want its last good definition (uid %s, generation 2, cwd /srv)", got, was.UID)
	}
	if len(s.ErrorsIn(key)) == 0 {
		t.Errorf("no error reported at %s: %v", key, s.Errors)
	}
}

// etcd restored empty, restored from an older backup, or another fleet's,
// while a node is stopped: at its start the store is lost — its snapshot
// is the one the node remembers, Stale and Unreadable with the reason and
// the recovery command, and it writes nothing — until the operator accepts
// the etcd (Accept, fleetd stopped). Then the members the accepted etcd
// lacks are held, not pruned at once.
func TestStore_EtcdLostWhileStoppedIsLostAtStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// restore returns the endpoints of the etcd the node finds at its
		// next start.
		restore func(t *testing.T, n *node) []string
		why     string
	}{
		{"restored empty", func(t *testing.T, n *node) []string {
			return newCluster(t).Endpoints()
		}, "etcd holds no fleet identity"},
		{"the fleet's prefix deleted by hand", func(t *testing.T, n *node) []string {
			if _, err := n.cli.Delete(context.Background(), prefix(t)+"/", clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
			return nil
		}, "etcd holds no fleet identity"},
		{"restored from an older backup", func(t *testing.T, n *node) []string {
			c := newCluster(t)
			copyKeys(t, n.cli, newClient(t, c.Endpoints()...), func(k string) bool { return !strings.HasSuffix(k, "/gamma") })
			return c.Endpoints()
		}, "behind revision"},
		{"another fleet's", func(t *testing.T, n *node) []string {
			c := newCluster(t)
			other, _ := runNode(t, nil, c.Endpoints()...) // writes its own identity
			other.apply(profile("claude"))
			return c.Endpoints()
		}, "etcd holds fleet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			n, stop := runNode(t, &Options{StateDir: state})
			threeMembers(n)
			was := n.st.Snapshot()
			stop()
			endpoints := tc.restore(t, n)

			lost, stopLost := runNode(t, &Options{StateDir: state}, endpoints...)
			s := lost.until("lost", lostSaying(tc.why))
			if !strings.Contains(s.Stale.Error(), "fleetd store accept --state-dir "+state) {
				t.Errorf("the reason does not say how to recover: %v", s.Stale)
			}
			if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, memberNamesOf(s)); diff != "" || s.Profiles["claude"] == nil {
				t.Errorf("lost snapshot: members -want +got:\n%s profile %v", diff, s.Profiles["claude"])
			}
			if s.Members["alpha"].UID != was.Members["alpha"].UID {
				t.Error("the lost snapshot's alpha is not the remembered one")
			}
			ctx := context.Background()
			if err := lost.st.Apply(ctx, member("delta", "claude")); !errors.Is(err, store.ErrLost) {
				t.Errorf("Apply on a lost store: %v, want ErrLost", err)
			}
			if err := lost.st.Delete(ctx, v1alpha1.KindMember, "alpha"); !errors.Is(err, store.ErrLost) {
				t.Errorf("Delete on a lost store: %v, want ErrLost", err)
			}
			if resp, err := lost.cli.Get(ctx, prefix(t)+"/members/delta"); err != nil || len(resp.Kvs) != 0 {
				t.Errorf("a lost store wrote delta: %v %v", resp, err)
			}
			stopLost()

			acc, err := Accept(state)
			if err != nil || acc.Identity == "" || acc.Revision == 0 || !strings.Contains(acc.Lost, tc.why) {
				t.Fatalf("Accept = %+v, %v; want the identity, revision and reason forgotten", acc, err)
			}
			if _, err := Accept(state); err == nil {
				t.Error("a second Accept found something to accept")
			}
			back, _ := runNode(t, &Options{StateDir: state}, endpoints...)
			s = back.st.Snapshot()
			if s.Stale != nil || s.Unreadable != nil {
				t.Fatalf("after Accept: Stale %v, Unreadable %v", s.Stale, s.Unreadable)
			}
			if tc.name == "restored empty" {
				if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, slices.Sorted(maps.Keys(s.PruneHeld))); diff != "" {
					t.Errorf("after accepting an empty etcd, held -want +got:\n%s", diff)
				}
			}
			if err := back.st.Apply(ctx, member("delta", "claude")); err != nil {
				t.Errorf("Apply after Accept: %v", err)
			}
		})
	}
}

// etcd restored from an older backup under a running node (the same
// endpoint, an etcd whose revision is behind the one the node has seen):
// the node finds out within its check interval, keeps its snapshot as it
// was — gamma, which the backup lacks, too — and refuses writes with the
// reason, where it used to answer a create with 409 although it was
// stored, and a delete of a listed member with 404.
func TestStore_RunningNodeSeesTheRevisionGoBack(t *testing.T) {
	proxy, err := etcdtest.StartProxy(cluster.Endpoint(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Cut)
	n := startNode(t, &Options{StateDir: t.TempDir(), CheckInterval: 100 * time.Millisecond}, proxy.URL())
	threeMembers(n)
	backup := newCluster(t)
	restored := newClient(t, backup.Endpoints()...)
	copyKeys(t, newClient(t), restored, func(k string) bool { return !strings.HasSuffix(k, "/gamma") })

	if err := proxy.Switch(backup.Endpoint(0)); err != nil {
		t.Fatal(err)
	}
	s := n.until("lost", lostSaying("behind revision"))
	if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, memberNamesOf(s)); diff != "" {
		t.Errorf("members once lost -want +got:\n%s", diff)
	}
	ctx := context.Background()
	if err := n.st.Apply(ctx, member("delta", "claude")); !errors.Is(err, store.ErrLost) {
		t.Errorf("a create on the restored etcd: %v, want ErrLost", err)
	}
	if err := n.st.Delete(ctx, v1alpha1.KindMember, "alpha"); !errors.Is(err, store.ErrLost) {
		t.Errorf("a delete on the restored etcd: %v, want ErrLost", err)
	}
	for _, key := range []string{"/members/delta", "/members/alpha"} {
		resp, err := restored.Get(ctx, prefix(t)+key)
		if want := key == "/members/alpha"; err != nil || (len(resp.Kvs) == 1) != want {
			t.Errorf("%s on the restored etcd: %v %v; want it there: %v", key, resp.Kvs, err, want)
		}
	}
}

// The fleet's identity deleted under a running node: lost at once (the
// identity is watched), the snapshot kept.
func TestStore_IdentityDeletedUnderARunningNodeIsLost(t *testing.T) {
	n := startNode(t, &Options{CheckInterval: time.Hour})
	threeMembers(n)
	if _, err := n.cli.Delete(context.Background(), prefix(t)+"/identity"); err != nil {
		t.Fatal(err)
	}
	s := n.until("lost", lostSaying("etcd holds no fleet identity"))
	if len(s.Members) != 3 {
		t.Errorf("members once lost: %v, want all three", memberNamesOf(s))
	}
}

// On etcd too, one change that removes most of a node's members without
// deletes through the store — member keys deleted by hand, every binding
// moved — is held; deletes through the store, from this node or another
// (their tombstones), and members bound to another node are not.
func TestStore_MassRemovalByHandIsHeldDeletesAreNot(t *testing.T) {
	ctx := context.Background()
	a := startNode(t, &Options{Node: "a"})
	b := startNode(t, &Options{Node: "b"})
	a.apply(profile("claude"))
	bindAll := func(names ...string) {
		for _, name := range names {
			a.apply(member(name, "claude"))
		}
		a.caughtUp()
		for _, name := range names {
			a.bind(name, "b", "")
		}
		b.caughtUp()
		if got := memberNamesOf(b.st.Snapshot()); !slices.Equal(got, names) {
			t.Fatalf("b shows %v, want %v", got, names)
		}
	}

	bindAll("m1", "m2", "m3", "m4")
	for _, name := range []string{"m1", "m2", "m3", "m4"} { // through the other node's store
		if err := a.st.Delete(ctx, v1alpha1.KindMember, name); err != nil {
			t.Fatal(err)
		}
	}
	b.caughtUp()
	if s := b.st.Snapshot(); len(s.Members) != 0 || s.PruneHeld != nil {
		t.Errorf("after deletes through the store: b shows %v, held %v; want nothing", memberNamesOf(s), s.PruneHeld)
	}

	bindAll("n1", "n2", "n3", "n4")
	a.bind("n1", "a", "")
	a.bind("n2", "a", "")
	a.bind("n3", "a", "")
	b.caughtUp()
	if s := b.st.Snapshot(); !slices.Equal(memberNamesOf(s), []string{"n4"}) || s.PruneHeld != nil {
		t.Errorf("after three of four moved to a: b shows %v, held %v; want n4 only", memberNamesOf(s), s.PruneHeld)
	}

	if _, err := a.cli.Delete(ctx, prefix(t)+"/members/", clientv3.WithPrefix()); err != nil { // etcdctl del --prefix, by hand
		t.Fatal(err)
	}
	b.caughtUp()
	a.caughtUp()
	if s := b.st.Snapshot(); len(s.Members) != 0 || s.PruneHeld != nil {
		t.Errorf("b, its only member deleted by hand (one is no mass removal): shows %v, held %v", memberNamesOf(s), s.PruneHeld)
	}
	if s := a.st.Snapshot(); len(s.PruneHeld) != 3 || len(s.Members) != 3 {
		t.Errorf("a, its three members deleted by hand: shows %v, held %v; want the three held", memberNamesOf(s), s.PruneHeld)
	}
	if got := a.st.PruneHold().Confirm(); len(got) != 3 {
		t.Errorf("Confirm = %v", got)
	}
	if s := a.st.Snapshot(); len(s.Members) != 0 {
		t.Errorf("after Confirm a shows %v", memberNamesOf(s))
	}
}
