package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// waitLimit bounds every wait of these tests for something etcd does; none
// takes more than a fraction of a second when things work.
const waitLimit = 20 * time.Second

// node is one Store on the shared cluster, running, as one fleetd node
// would run it.
type node struct {
	t      *testing.T
	st     *Store
	cli    *clientv3.Client
	change <-chan struct{}
}

// newClient returns a client of the shared cluster on endpoints (default
// all of them), closed when the test ends.
func newClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = cluster.Endpoints()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// prefixes are the tests' key prefixes, each used once per process (with
// -count, a test runs again under a new one).
var prefixes sync.Map // test name → prefix

var prefixSeq atomic.Int64

// prefix is the test's own key prefix on the shared cluster, empty when the
// test starts.
func prefix(t *testing.T) string {
	if p, ok := prefixes.Load(t); ok {
		return p.(string)
	}
	p := fmt.Sprintf("/test/%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), prefixSeq.Add(1))
	prefixes.Store(t, p)
	t.Cleanup(func() { prefixes.Delete(t) })
	return p
}

// startNode runs a Store under the test's prefix until the test ends and
// waits for its first list.
func startNode(t *testing.T, opts *Options, endpoints ...string) *node {
	t.Helper()
	n, _ := runNode(t, opts, endpoints...)
	return n
}

// runNode is startNode with a stop: it stops the Store (and waits for Run)
// before the test ends; calling it again does nothing.
func runNode(t *testing.T, opts *Options, endpoints ...string) (*node, func()) {
	t.Helper()
	n, stop := runNodeOn(t, newClient(t, endpoints...), opts)
	n.until("synced", func(s *store.Snapshot) bool { return s.Synced })
	return n, stop
}

// runNodeOn is runNode through cli, and returns without waiting for the
// first list.
func runNodeOn(t *testing.T, cli *clientv3.Client, opts *Options) (*node, func()) {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Prefix = prefix(t)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := New(cli, &o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{t: t, st: st, cli: cli, change: st.Watch(ctx)}
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return n, stop
}

// until returns once cond holds for the node's snapshot, checked after
// every change the store signals.
func (n *node) until(what string, cond func(*store.Snapshot) bool) *store.Snapshot {
	n.t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		if s := n.st.Snapshot(); cond(s) {
			return s
		}
		select {
		case <-n.change:
		case <-deadline.C:
			n.t.Fatalf("not %s within %s; snapshot %+v", what, waitLimit, n.st.Snapshot())
		}
	}
}

func member(name, profile string) *v1alpha1.Member {
	m := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name}, Spec: v1alpha1.MemberSpec{Profile: profile}}
	m.SetDefaults()
	return m
}

func profile(name string) *v1alpha1.Profile {
	return &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: name}, Spec: v1alpha1.ProfileSpec{Harness: "claude"}}
}

func (n *node) apply(obj v1alpha1.Object) {
	n.t.Helper()
	if err := n.st.Apply(context.Background(), obj); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) member(name string) *v1alpha1.Member {
	n.t.Helper()
	m := n.st.Snapshot().Members[name]
	if m == nil {
		n.t.Fatalf("no member %s", name)
	}
	return m
}

func TestStore_CreateUpdateDeleteWithVersions(t *testing.T) {
	n := startNode(t, nil)
	n.apply(profile("claude"))
	n.apply(member("alpha", "claude"))

	// Visible on return, with the metadata the store owns.
	a := n.member("alpha")
	if a.UID == "" || a.Generation != 1 || a.CreationTimestamp == nil {
		t.Errorf("created member: uid %q generation %d creationTimestamp %v", a.UID, a.Generation, a.CreationTimestamp)
	}
	resp, err := n.cli.Get(context.Background(), prefix(t)+"/members/alpha")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the member's key: %v %v", resp, err)
	}
	if want := strconv.FormatInt(resp.Kvs[0].ModRevision, 10); a.ResourceVersion != want {
		t.Errorf("resourceVersion %q, want the key's mod revision %s", a.ResourceVersion, want)
	}
	if got := n.st.Snapshot().Sources[store.Key{Kind: v1alpha1.KindMember, Name: "alpha"}]; got != prefix(t)+"/members/alpha" {
		t.Errorf("source %q, want the etcd key", got)
	}
	if strings.Contains(string(resp.Kvs[0].Value), "status") || strings.Contains(string(resp.Kvs[0].Value), "resourceVersion") {
		t.Errorf("stored value carries status or a resourceVersion: %s", resp.Kvs[0].Value)
	}

	// A spec change bumps the generation; a label change does not; both
	// get a new resourceVersion; the uid stays.
	b := a.DeepCopy()
	b.ResourceVersion = ""
	b.Spec.Paused = true
	n.apply(b)
	b2 := n.member("alpha")
	c := b2.DeepCopy()
	c.ResourceVersion = ""
	c.Labels = map[string]string{"team": "red"}
	n.apply(c)
	c2 := n.member("alpha")
	type version struct {
		UID  string
		Gen  int64
		Rev  string
		Lbls map[string]string
	}
	rev := func(m *v1alpha1.Member) int64 { r, _ := strconv.ParseInt(m.ResourceVersion, 10, 64); return r }
	if diff := cmp.Diff(version{a.UID, 2, b2.ResourceVersion, nil}, version{b2.UID, b2.Generation, b2.ResourceVersion, b2.Labels}); diff != "" || rev(b2) <= rev(a) {
		t.Errorf("after a spec change (-want +got):\n%s(revision %d after %d)", diff, rev(b2), rev(a))
	}
	if diff := cmp.Diff(version{a.UID, 2, c2.ResourceVersion, map[string]string{"team": "red"}}, version{c2.UID, c2.Generation, c2.ResourceVersion, c2.Labels}); diff != "" || rev(c2) <= rev(b2) {
		t.Errorf("after a label change (-want +got):\n%s", diff)
	}

	// Writing the same object again writes nothing: same version, same
	// pointer (controllers compare pointers).
	same := c2.DeepCopy()
	same.ResourceVersion = ""
	n.apply(same)
	if got := n.member("alpha"); got != c2 {
		t.Errorf("an unchanged apply replaced the object: %+v", got)
	}

	if err := n.st.Delete(context.Background(), v1alpha1.KindMember, "alpha"); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.st.Get(v1alpha1.KindMember, "alpha"); ok {
		t.Error("deleted member still in the snapshot on return")
	}
	if err := n.st.Delete(context.Background(), v1alpha1.KindMember, "alpha"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting a missing member: %v, want ErrNotFound", err)
	}
	if got := n.st.List(v1alpha1.KindProfile); len(got) != 1 || got[0].GetName() != "claude" {
		t.Errorf("profiles: %v", got)
	}
}

func TestStore_RefusesInvalidOversizedAndSecretObjects(t *testing.T) {
	n := startNode(t, &Options{MaxObjectBytes: 2048})
	big := member("big", "claude")
	big.Annotations = map[string]string{"note": strings.Repeat("x", 4096)}
	secret := profile("keyed")
	secret.Spec.Env = map[string]string{"ANTHROPIC_API_KEY": "sk-secret"}
	for _, tc := range []struct {
		name string
		obj  v1alpha1.Object
		want string
	}{
		{"invalid name", member("Bad Name", "claude"), "metadata.name"},
		{"over the size limit", big, "over the limit of 2048 bytes"},
		{"a credential in a profile's env", secret, "spec.env.ANTHROPIC_API_KEY"},
		{"a resourceVersion the store never wrote", &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "x", ResourceVersion: "abc"}, Spec: v1alpha1.MemberSpec{Profile: "p"}}, "metadata.resourceVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := n.st.Apply(context.Background(), tc.obj)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Apply = %v, want an error about %s", err, tc.want)
			}
		})
	}
	for _, dir := range kindDirs { // the fleet's identity is the only key under the prefix
		resp, err := n.cli.Get(context.Background(), prefix(t)+"/"+dir+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != 0 {
			t.Errorf("keys written under %s/: %v %v, want none", dir, resp.Count, err)
		}
	}
}

func TestStore_StaleResourceVersionIsAConflict(t *testing.T) {
	n := startNode(t, nil)
	n.apply(member("alpha", "one"))
	read := n.member("alpha").DeepCopy()

	// Someone else writes in between.
	other := read.DeepCopy()
	other.Spec.Paused = true
	n.apply(other)
	winner := n.member("alpha")

	stale := read.DeepCopy()
	stale.Spec.Profile = "two"
	err := n.st.Apply(context.Background(), stale)
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("apply over a stale resourceVersion: %v, want ErrConflict", err)
	}
	if got := n.member("alpha"); got != winner {
		t.Errorf("the conflicting write changed the object: %+v", got)
	}

	// The current version wins.
	fresh := winner.DeepCopy()
	fresh.Spec.Profile = "two"
	n.apply(fresh)
	if got := n.member("alpha"); got.Spec.Profile != "two" || got.Generation != 3 {
		t.Errorf("after a write at the current version: profile %q generation %d", got.Spec.Profile, got.Generation)
	}

	// A version for an object that no longer exists, or never did.
	if err := n.st.Delete(context.Background(), v1alpha1.KindMember, "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := n.st.Apply(context.Background(), fresh); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("apply with a version over a deleted object: %v, want ErrConflict", err)
	}
}

func TestStore_WatchSeesOtherNodesAndBadValues(t *testing.T) {
	a := startNode(t, nil, cluster.Endpoint(0))
	b := startNode(t, nil, cluster.Endpoint(1))

	a.apply(member("alpha", "one"))
	got := b.until("alpha seen by the other node", func(s *store.Snapshot) bool { return s.Members["alpha"] != nil })
	if want := a.member("alpha"); got.Members["alpha"].UID != want.UID || got.Members["alpha"].ResourceVersion != want.ResourceVersion {
		t.Errorf("the other node sees %+v, want %+v", got.Members["alpha"].ObjectMeta, want.ObjectMeta)
	}
	// It references a Profile nobody defined: unresolved, located at the key.
	if len(got.Unresolved) != 1 || !strings.Contains(got.Unresolved[0].Error(), prefix(t)+"/members/alpha") {
		t.Errorf("unresolved: %v", got.Unresolved)
	}

	// A value written behind the store's back that does not decode: an
	// error at its key, and the last good object stays.
	good := b.member("alpha")
	key := prefix(t) + "/members/alpha"
	if _, err := a.cli.Put(context.Background(), key, `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"alpha"},"spec":{"profile":"one","command":"rm -rf /"}}`); err != nil {
		t.Fatal(err)
	}
	s := b.until("the bad value reported", func(s *store.Snapshot) bool { return len(s.Errors) > 0 })
	if s.Members["alpha"] != good || s.Errors[0].File != key {
		t.Errorf("after a bad value: member %+v, errors %v", s.Members["alpha"], s.Errors)
	}
	// A key naming another object than it holds.
	if _, err := a.cli.Put(context.Background(), prefix(t)+"/members/beta", `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"gamma"},"spec":{"profile":"one"}}`); err != nil {
		t.Fatal(err)
	}
	s = b.until("the misnamed value reported", func(s *store.Snapshot) bool { return len(s.Errors) > 1 })
	if s.Members["beta"] != nil || s.Members["gamma"] != nil || !strings.Contains(s.Errors.Error(), "the key names Member/beta") {
		t.Errorf("after a misnamed value: members %v, errors %v", s.Members, s.Errors)
	}

	// Deleted by the other node.
	if err := b.st.Delete(context.Background(), v1alpha1.KindMember, "alpha"); err != nil {
		t.Fatal(err)
	}
	a.until("alpha gone on the first node", func(s *store.Snapshot) bool { return s.Members["alpha"] == nil })
}

// Sync reads the prefix once, before Run, so that a daemon serves the
// fleet from its first request; a value put by hand as YAML (etcdctl put
// KEY "$(cat file.yaml)") is read like a manifest file.
func TestStore_SyncReadsBeforeRun(t *testing.T) {
	cli := newClient(t)
	if _, err := cli.Put(context.Background(), prefix(t)+"/profiles/claude", "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n"); err != nil {
		t.Fatal(err)
	}
	st, err := New(cli, &Options{Prefix: prefix(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Snapshot().Synced {
		t.Fatal("synced before reading anything")
	}
	if err := st.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := st.Snapshot()
	if p := s.Profiles["claude"]; !s.Synced || p == nil || p.Spec.Harness != "claude" || p.Generation != 1 {
		t.Errorf("after Sync: synced %v, profile %+v, errors %v", s.Synced, p, s.Errors)
	}
}

func TestNew_RefusesABadPrefix(t *testing.T) {
	for _, p := range []string{"fleetd", "/fleetd/"} {
		if _, err := New(nil, &Options{Prefix: p}); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
}

// An object put by hand (no uid or generation in it) has a uid that lasts
// as long as its key, kept when the store first writes it, and a spec
// change through the store bumps its generation as for any other.
func TestStore_HandWrittenObjectKeepsItsUIDAcrossWrites(t *testing.T) {
	n := startNode(t, nil)
	key := prefix(t) + "/members/alpha"
	if _, err := n.cli.Put(context.Background(), key, "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: alpha}\nspec: {profile: one}\n"); err != nil {
		t.Fatal(err)
	}
	a := n.until("alpha seen", func(s *store.Snapshot) bool { return s.Members["alpha"] != nil }).Members["alpha"]
	if a.UID == "" || a.Generation != 1 {
		t.Fatalf("hand-written alpha: uid %q generation %d", a.UID, a.Generation)
	}
	same := a.DeepCopy()
	same.ResourceVersion = ""
	n.apply(same)
	if b := n.member("alpha"); b.UID != a.UID || b.Generation != 1 {
		t.Errorf("rewritten by the store with the same spec: uid %q generation %d, want %q and 1", b.UID, b.Generation, a.UID)
	}
	changed := a.DeepCopy()
	changed.ResourceVersion, changed.Spec.Paused = "", true
	n.apply(changed)
	if c := n.member("alpha"); c.UID != a.UID || c.Generation != 2 {
		t.Errorf("after a spec change: uid %q generation %d, want %q and 2", c.UID, c.Generation, a.UID)
	}
}

// caughtUp waits until the store's snapshot reflects etcd's current
// revision in every key space it reads: everything written before the
// call has been watched. A key space nothing was written to hears of the
// revision only from a progress notification, which it asks the store's
// watch stream for (again, until the watches are running).
func (n *node) caughtUp() {
	n.t.Helper()
	resp, err := n.cli.Get(context.Background(), "/")
	if err != nil {
		n.t.Fatal(err)
	}
	rev := resp.Header.Revision
	deadline := time.Now().Add(waitLimit)
	for {
		if err := n.cli.RequestProgress(clientv3.WithRequireLeader(context.Background())); err != nil {
			n.t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := n.st.WaitBindings(ctx, rev)
		for _, kind := range []string{v1alpha1.KindMember, v1alpha1.KindProfile, v1alpha1.KindTenant} {
			err = cmpOr(err, n.st.waitWritten(ctx, kind, rev))
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatal(err)
		}
	}
}

// TestStore_SharedWorktreeBranchIsUnresolved: two Members whose worktrees
// claim one branch of one repository (one through its Profile) are both in
// the snapshot, and the claim is reported, as fleetd validate reports it.
func TestStore_SharedWorktreeBranchIsUnresolved(t *testing.T) {
	n := startNode(t, nil, cluster.Endpoint(0))
	p := profile("agents")
	p.Spec.Worktree = &v1alpha1.ProfileWorktree{Repo: "/srv/api", BranchPrefix: "agents"}
	n.apply(p)
	alpha := member("alpha", "agents")
	n.apply(alpha)
	own := member("beta", "agents")
	own.Spec.Worktree = &v1alpha1.MemberWorktree{Repo: "/srv/api", Branch: "agents/alpha", Cleanup: v1alpha1.CleanupNever}
	n.apply(own)
	got := n.until("both members seen", func(s *store.Snapshot) bool { return s.Members["alpha"] != nil && s.Members["beta"] != nil })
	if len(got.Unresolved) != 1 || !strings.Contains(got.Unresolved[0].Error(), `branch "agents/alpha" of repository /srv/api`) ||
		!strings.Contains(got.Unresolved[0].Error(), prefix(t)+"/members/beta") {
		t.Errorf("unresolved: %v", got.Unresolved)
	}
}

func tenant(name string) *v1alpha1.Tenant {
	return &v1alpha1.Tenant{ObjectMeta: v1alpha1.ObjectMeta{Name: name}, Spec: v1alpha1.TenantSpec{URL: "https://" + name + ".example/mcp", CredentialEnv: "TENANT_TOKEN"}}
}

// Profiles and Tenants are written like Members: under their keys, with
// versions, a generation bumped by a spec change, a dry run that writes
// nothing, and a delete.
func TestStore_ProfilesAndTenantsAreWrittenUnderTheirKeys(t *testing.T) {
	n := startNode(t, nil)
	ctx := context.Background()
	for _, obj := range []v1alpha1.Object{profile("claude"), tenant("acme")} {
		kind, name := obj.GetObjectKind(), obj.GetName()
		key := prefix(t) + "/" + strings.ToLower(kind) + "s/" + name
		if err := n.st.CheckApply(ctx, obj); err != nil {
			t.Fatalf("dry run of a new %s: %v", kind, err)
		}
		if resp, err := n.cli.Get(ctx, key, clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
			t.Fatalf("a dry run wrote %s: %v %v", key, resp, err)
		}
		n.apply(obj)
		got, ok := n.st.Get(kind, name)
		if !ok || got.GetMeta().Generation != 1 || got.GetMeta().UID == "" {
			t.Fatalf("%s/%s after apply: %+v", kind, name, got)
		}
		resp, err := n.cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 || got.GetMeta().ResourceVersion != strconv.FormatInt(resp.Kvs[0].ModRevision, 10) {
			t.Fatalf("%s: %v %v; the object's resourceVersion %s", key, resp, err, got.GetMeta().ResourceVersion)
		}

		changed := got.(interface{ DeepCopyObject() v1alpha1.Object }).DeepCopyObject()
		switch c := changed.(type) {
		case *v1alpha1.Profile:
			c.Spec.Args = []string{"--model", "opus"}
		case *v1alpha1.Tenant:
			c.Spec.URL = "https://other.example/mcp"
		}
		n.apply(changed)
		after, _ := n.st.Get(kind, name)
		if after.GetMeta().Generation != 2 || after.GetMeta().UID != got.GetMeta().UID {
			t.Errorf("%s/%s after a spec change: generation %d uid %q, want 2 and %q", kind, name, after.GetMeta().Generation, after.GetMeta().UID, got.GetMeta().UID)
		}
		// The version read before the change is stale now, for a dry run too.
		if err := n.st.CheckApply(ctx, got); !errors.Is(err, store.ErrConflict) {
			t.Errorf("dry run over a stale resourceVersion: %v, want ErrConflict", err)
		}

		if err := n.st.Delete(ctx, kind, name); err != nil {
			t.Fatal(err)
		}
		if _, ok := n.st.Get(kind, name); ok {
			t.Errorf("%s/%s still in the snapshot after its delete returned", kind, name)
		}
		if err := n.st.Delete(ctx, kind, name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleting %s/%s again: %v, want ErrNotFound", kind, name, err)
		}
	}
}

// A Profile or Tenant a Member references is not deleted, whichever node
// the Member is bound to — also one no node runs yet, which only the
// store's Fleet view shows — and whether or not the deleting node has seen
// the Member yet.
func TestStore_DeleteOfAReferencedObjectIsRefused(t *testing.T) {
	n := startNode(t, &Options{Node: "laptop"})
	ctx := context.Background()
	n.apply(profile("claude"))
	n.apply(tenant("acme"))
	far := member("far", "claude")
	far.Spec.MCPTarget = &v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "acme"}
	n.apply(far) // bound to no node: not in this node's snapshot
	if _, ok := n.st.Get(v1alpha1.KindMember, "far"); ok {
		t.Fatal("a member bound to no node is in the node's snapshot")
	}
	if got, ok := n.st.Fleet().Get(v1alpha1.KindMember, "far"); !ok || got.GetMeta().UID == "" {
		t.Errorf("the fleet's view lacks member far: %v", got)
	}
	if got := n.st.Fleet().List(v1alpha1.KindMember); len(got) != 1 {
		t.Errorf("the fleet's view lists %d members, want far alone", len(got))
	}
	for _, kind := range []string{v1alpha1.KindProfile, v1alpha1.KindTenant} {
		name := map[string]string{v1alpha1.KindProfile: "claude", v1alpha1.KindTenant: "acme"}[kind]
		err := n.st.Delete(ctx, kind, name)
		if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "member/far") {
			t.Errorf("delete %s/%s while far references it: %v, want ErrInUse naming member/far", kind, name, err)
		}
	}
	if err := n.st.Delete(ctx, v1alpha1.KindMember, "far"); err != nil {
		t.Fatal(err)
	}

	// A member put straight into etcd just before the delete: the delete
	// either sees it or fails its compare and checks again.
	other := newClient(t)
	for i := range 10 {
		name := fmt.Sprintf("racer-%d", i)
		if _, err := other.Put(ctx, prefix(t)+"/members/"+name, `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"`+name+`"},"spec":{"profile":"claude"}}`); err != nil {
			t.Fatal(err)
		}
		if err := n.st.Delete(ctx, v1alpha1.KindProfile, "claude"); !errors.Is(err, store.ErrInUse) {
			t.Fatalf("delete of the profile right after %s referenced it: %v, want ErrInUse", name, err)
		}
		if err := n.st.Delete(ctx, v1alpha1.KindMember, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.st.Delete(ctx, v1alpha1.KindProfile, "claude"); err != nil {
		t.Errorf("delete once no member references it: %v", err)
	}
}

// A snapshot is Synced only once it holds what every key space's first
// list read. The informers list concurrently and each rebuilds the
// snapshot from every kind's items: a rebuild that read the profiles'
// items before their first list landed must not call its snapshot Synced
// because the list landed while it checked the members. The profiles'
// list is held here until the tenants' list — whose rebuild checks every
// member again — has returned, so that it lands during that rebuild.
func TestStore_TheFirstSyncedSnapshotHoldsEveryObject(t *testing.T) {
	const members = 1000
	n := startNode(t, nil)
	n.apply(profile("claude"))
	n.apply(tenant("acme"))
	var puts []clientv3.Op // as etcdctl put would: YAML, no metadata the store owns
	for i := range members {
		name := fmt.Sprintf("m%03d", i)
		puts = append(puts, clientv3.OpPut(prefix(t)+"/members/"+name, "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata:\n  name: "+name+"\nspec:\n  profile: claude\n"))
	}
	for chunk := range slices.Chunk(puts, 100) {
		if _, err := n.cli.Txn(context.Background()).Then(chunk...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for try := range 2 {
		cli := newClient(t)
		g := &gatedKV{KV: cli.KV, tenants: make(chan struct{}), profiles: make(chan struct{})}
		cli.KV = g
		started, stop := runNodeOn(t, cli, nil)
		first := started.until("synced", func(s *store.Snapshot) bool {
			if !s.Synced && g.tenantsHeld() && len(s.Members) == members && started.st.bindings.Synced() && started.st.identity.Synced() {
				close(g.tenants)
			}
			return s.Synced
		})
		stop()
		if len(first.Members) != members || len(first.Profiles) != 1 || len(first.Tenants) != 1 || len(first.Unresolved) != 0 {
			t.Fatalf("start %d: the first Synced snapshot holds %d members, %d profiles, %d tenants and %d unresolved references; want %d, 1, 1 and none",
				try, len(first.Members), len(first.Profiles), len(first.Tenants), len(first.Unresolved), members)
		}
	}
}

// gatedKV holds the first list of the tenants until tenants is closed, and
// of the profiles until the tenants' list has returned.
type gatedKV struct {
	clientv3.KV
	tenants, profiles chan struct{}
	once              sync.Once
}

func (g *gatedKV) tenantsHeld() bool {
	select {
	case <-g.tenants:
		return false
	default:
		return true
	}
}

func (g *gatedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	var wait chan struct{}
	switch {
	case strings.Contains(key, "/tenants/"):
		wait = g.tenants
	case strings.Contains(key, "/profiles/"):
		wait = g.profiles
	}
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	resp, err := g.KV.Get(ctx, key, opts...)
	if wait == g.tenants {
		g.once.Do(func() { close(g.profiles) })
	}
	return resp, err
}
