package informer

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// waitLimit bounds every wait for something etcd does; none takes more than
// a fraction of a second when things work.
const waitLimit = 20 * time.Second

var prefixes atomic.Int64

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

// mirror is an informer of strings (a key's value, upper-cased) that
// counts its decodes and skips keys below one it reads.
type mirror struct {
	*Informer[string]
	prefix  string
	decodes atomic.Int64
}

func newMirror(t *testing.T, cli *clientv3.Client, edit func(*Options[string])) *mirror {
	t.Helper()
	m := &mirror{prefix: fmt.Sprintf("/informer-test-%d/", prefixes.Add(1))}
	o := Options[string]{Client: cli, Prefix: m.prefix, PageSize: 3, RetryInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
		Decode: func(kv *mvccpb.KeyValue, _ string, _ bool) (string, bool) {
			if strings.Contains(strings.TrimPrefix(string(kv.Key), m.prefix), "/") {
				return "", false
			}
			m.decodes.Add(1)
			return strings.ToUpper(string(kv.Value)), true
		}}
	if edit != nil {
		edit(&o)
	}
	m.Informer = New(o)
	return m
}

// run runs the informer until the test ends.
func (m *mirror) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// values are the items' values by key name.
func (m *mirror) values() map[string]string {
	out := map[string]string{}
	for k, it := range m.Items() {
		out[strings.TrimPrefix(k, m.prefix)] = it.Value
	}
	return out
}

// until returns once cond holds, checked after every change.
func (m *mirror) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		ch := m.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("not %s within %s: %v", what, waitLimit, m.values())
		}
	}
}

func put(t *testing.T, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := cli.Put(context.Background(), key, value)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// A list reads every key in pages (3 to a request here), leaves out what
// Decode leaves out, and the watch from its revision follows puts and
// deletes; a relist decodes only the keys that changed.
func TestInformer_ListsInPagesAndFollowsChanges(t *testing.T) {
	cli := newClient(t)
	m := newMirror(t, cli, nil)
	want := map[string]string{}
	for i := range 7 {
		k := fmt.Sprintf("k%d", i)
		put(t, cli, m.prefix+k, k)
		want[k] = strings.ToUpper(k)
	}
	put(t, cli, m.prefix+"k0/below", "left out")
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, m.values()); diff != "" || !m.Synced() {
		t.Fatalf("after the list (synced %v), -want +got:\n%s", m.Synced(), diff)
	}
	if n := m.decodes.Load(); n != 7 {
		t.Errorf("%d decodes for 7 keys", n)
	}
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := m.decodes.Load(); n != 7 {
		t.Errorf("%d decodes after a second list of the same 7 keys; want none more", n-7)
	}

	m.run(t)
	put(t, cli, m.prefix+"k1", "changed")
	put(t, cli, m.prefix+"k9", "new")
	if _, err := cli.Delete(context.Background(), m.prefix+"k2"); err != nil {
		t.Fatal(err)
	}
	want["k1"], want["k9"] = "CHANGED", "NEW"
	delete(want, "k2")
	m.until(t, "the changes seen", func() bool { return cmp.Equal(want, m.values()) })
	if m.Stale() != nil || m.Unavailable() != nil {
		t.Errorf("Stale %v, Unavailable %v; want neither", m.Stale(), m.Unavailable())
	}
}

// WaitRevision returns once a write's revision has been watched and what
// OnChange built from it is in place: a writer reads its own write.
func TestInformer_WaitRevisionReadsOwnWrites(t *testing.T) {
	cli := newClient(t)
	var mu sync.Mutex
	var built []string
	var m *mirror
	m = newMirror(t, cli, func(o *Options[string]) {
		o.OnChange = func() {
			names := slices.Sorted(maps.Keys(m.Items()))
			mu.Lock()
			built = names
			mu.Unlock()
		}
	})
	m.run(t)
	for i := range 20 {
		k := fmt.Sprintf("%sw%02d", m.prefix, i)
		rev := put(t, cli, k, "x")
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		err := m.WaitRevision(ctx, rev)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		found := slices.Contains(built, k)
		mu.Unlock()
		if !found {
			t.Fatalf("WaitRevision(%d) returned before OnChange built %s", rev, k)
		}
	}
}

// A watch from a revision etcd compacted away fails with ErrCompacted; the
// informer lists again at once and misses nothing that was created,
// changed or deleted meanwhile, then follows changes from the new list.
func TestInformer_CompactionRelistsAndMissesNothing(t *testing.T) {
	cli := newClient(t)
	lists := make(chan int64, 10)
	var m *mirror
	var once sync.Once
	m = newMirror(t, cli, func(o *Options[string]) {
		o.AfterList = func(rev int64) {
			lists <- rev
			once.Do(func() {
				put(t, cli, m.prefix+"changed", "after")
				put(t, cli, m.prefix+"created", "new")
				if _, err := cli.Delete(context.Background(), m.prefix+"deleted"); err != nil {
					t.Error(err)
				}
				rev := put(t, cli, "/informer-test-compact-marker", "x")
				if _, err := cli.Compact(context.Background(), rev, clientv3.WithCompactPhysical()); err != nil {
					t.Error(err)
				}
				// Else the watch may be served by a member that has not
				// applied it, and never fail.
				if err := cluster.WaitCompacted(context.Background(), rev); err != nil {
					t.Error(err)
				}
			})
		}
	})
	for _, k := range []string{"kept", "changed", "deleted"} {
		put(t, cli, m.prefix+k, "before")
	}
	m.run(t)
	want := map[string]string{"kept": "BEFORE", "changed": "AFTER", "created": "NEW"}
	m.until(t, "the compacted changes seen", func() bool { return cmp.Equal(want, m.values()) })
	for i := range 2 {
		select {
		case <-lists:
		case <-time.After(waitLimit):
			t.Fatalf("%d lists, want 2 (the first, and one after ErrCompacted)", i)
		}
	}
	put(t, cli, m.prefix+"later", "x")
	m.until(t, "a change after the relist seen", func() bool { return m.values()["later"] == "X" })
	if len(lists) != 0 {
		t.Errorf("%d more lists; want none: the watch after the relist follows changes", len(lists))
	}
}

// With etcd down (every member stopped) the informer is Stale from the end
// of its watch — before a list has failed — then Unavailable, with every
// item kept; with etcd back it lists again, is current, and has seen what
// changed meanwhile.
func TestInformer_EtcdDownIsStaleThenUnavailableThenCurrent(t *testing.T) {
	cli := newClient(t)
	var mu sync.Mutex
	var states []string // what OnChange saw, in order
	var m *mirror
	m = newMirror(t, cli, func(o *Options[string]) {
		o.RequestTimeout = 300 * time.Millisecond
		o.OnChange = func() {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case m.Unavailable() != nil:
				states = append(states, "unavailable")
			case m.Stale() != nil:
				states = append(states, "stale")
			default:
				states = append(states, "current")
			}
		}
	})
	put(t, cli, m.prefix+"a", "kept")
	m.run(t)
	m.until(t, "synced", m.Synced)

	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := cluster.RestartAll(); err != nil {
				t.Error(err)
			}
		}
	})
	for i := range cluster.Size() {
		cluster.Stop(i)
	}
	m.until(t, "unavailable", func() bool { return m.Unavailable() != nil })
	t.Logf("stale: %v", m.Stale())
	mu.Lock()
	if i := slices.Index(states, "stale"); i < 0 || i > slices.Index(states, "unavailable") {
		t.Errorf("states %v; want stale at the end of the watch, before a list failed", states)
	}
	mu.Unlock()
	if got := m.values(); got["a"] != "KEPT" {
		t.Errorf("items while etcd is down: %v; want the last read", got)
	}

	if err := cluster.RestartAll(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	put(t, newClient(t), m.prefix+"b", "after")
	m.until(t, "current again", func() bool { return m.Stale() == nil && m.Unavailable() == nil && m.values()["b"] == "AFTER" })
}

// A watch response may carry a key's put and its delete (a watcher behind
// by a few writes): the key is gone after it, and a delete of a key never
// seen changes nothing. OnChange, run for it before Revision moves, learns
// from Lookup that the items reach revision 7, where the key is gone, not
// the revision before its put (a consumer took the key for not seen yet,
// and missed its delete: etcdstore's fence under load).
func TestInformer_ApplyPutThenDeleteInOneResponse(t *testing.T) {
	var m *mirror
	type seen struct {
		ok       bool
		rev, pub int64
	}
	var during []seen
	m = newMirror(t, nil, func(o *Options[string]) {
		o.OnChange = func() {
			_, ok, rev := m.Lookup(m.prefix + "brief")
			during = append(during, seen{ok, rev, m.Revision()})
		}
	})
	key := []byte(m.prefix + "brief")
	m.apply([]*clientv3.Event{
		{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{Key: key, Value: []byte("x"), ModRevision: 5, CreateRevision: 5}},
		{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: key, ModRevision: 6}},
		{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(m.prefix + "never"), ModRevision: 7}},
	}, 7)
	if got := m.values(); len(got) != 0 || m.Revision() != 7 {
		t.Errorf("after a put and a delete in one response: %v at revision %d; want nothing at 7", got, m.Revision())
	}
	if diff := cmp.Diff([]seen{{ok: false, rev: 7, pub: 0}}, during, cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("what OnChange saw (key there, Lookup's revision, Revision) -want +got:\n%s", diff)
	}
}

// Writes that come while OnChange still builds from the last ones are
// applied together, in order, with one OnChange: a consumer that rebuilds
// from every item is not run once per write (50 puts and a delete while
// it was busy cost at most a few builds, not 51 as before).
func TestInformer_ChangesThatCameMeanwhileAreBuiltOnce(t *testing.T) {
	cli := newClient(t)
	busy, release := make(chan struct{}), make(chan struct{})
	var builds atomic.Int64
	var m *mirror
	m = newMirror(t, cli, func(o *Options[string]) {
		o.OnChange = func() {
			if _, ok := m.Items()[m.prefix+"first"]; !ok {
				return
			}
			if builds.Add(1) == 1 {
				close(busy)
				<-release // the watch's first build takes a while
			}
		}
	})
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.run(t)
	put(t, cli, m.prefix+"first", "x")
	<-busy
	want := map[string]string{"first": "X"}
	for i := range 50 {
		k := fmt.Sprintf("k%02d", i)
		put(t, cli, m.prefix+k, k)
		time.Sleep(time.Millisecond) // writes apart, as separate writers make them: etcd sends writes it commits at once in one response anyway
		want[k] = strings.ToUpper(k)
	}
	if _, err := cli.Delete(context.Background(), m.prefix+"k07"); err != nil {
		t.Fatal(err)
	}
	delete(want, "k07")
	close(release)
	m.until(t, "every write seen", func() bool { return cmp.Equal(want, m.values()) })
	if n := builds.Load() - 1; n > 10 {
		t.Errorf("%d builds for 51 writes that came during one build; want them built together", n)
	}
}
