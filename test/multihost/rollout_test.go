package multihost

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// rolloutFleet is a Profile and four members of it, two pinned to each
// node; args are the profile's.
func rolloutFleet(t *testing.T, args string) string {
	t.Helper()
	doc := `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude, args: [` + args + `]}
`
	for _, m := range []struct{ name, node string }{{"a1", "laptop"}, {"a2", "laptop"}, {"b1", "buildbox"}, {"b2", "buildbox"}} {
		doc += "---\napiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + m.name + "}\nspec: {profile: claude, nodeName: " + m.node + "}\n"
	}
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitKey returns once etcd holds key, watching for it.
func waitKey(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) > 0 {
		return
	}
	for wr := range cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut {
				return
			}
		}
	}
	t.Fatalf("etcd never held %s", key)
}

// A Profile change rolls out across the nodes of a fleet on etcd: every
// member of both nodes is replaced, one at a time for the whole fleet
// (spec.rollout.maxUnavailable 1 counts every node's members), and `fleetd
// rollout` works through either node — the revisions recorded in etcd and
// read by both, undo writing the old spec back into etcd, pause and resume
// writing spec.rollout.paused. Issue 21 item 4, on the etcd store.
func TestRollout_AcrossTheNodesOfAFleet(t *testing.T) {
	prefix := uniquePrefix("/rollout")
	laptop := startNode(t, prefix, "laptop")
	buildbox := startNode(t, prefix, "buildbox")
	cli := etcdClient(t)
	run := func(n *fleetNode, wantCode int, wantOut, wantErr string, args ...string) string {
		t.Helper()
		code, stdout, stderr := n.cli(t, args...)
		suffix, isSuffix := strings.CutPrefix(wantOut, "…")
		if code != wantCode || !(stdout == wantOut || isSuffix && strings.HasSuffix(stdout, suffix)) || !strings.Contains(stderr, wantErr) || wantErr == "" && stderr != "" {
			t.Fatalf("fleetd %s: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s\nstderr holding %q",
				strings.Join(args, " "), code, stdout, stderr, wantCode, wantOut, wantErr)
		}
		return stdout
	}
	run(laptop, 0, "profile/claude created\nmember/a1 created\nmember/a2 created\nmember/b1 created\nmember/b2 created\n", "",
		"apply", "-f", rolloutFleet(t, "--model, sonnet"))
	// Each node's WaitFor sees the members it runs.
	nodes := []struct {
		n       *fleetNode
		members []string
	}{{laptop, []string{"a1", "a2"}}, {buildbox, []string{"b1", "b2"}}}
	for _, node := range nodes {
		for _, name := range node.members {
			node.n.waitFor(t, name+" Ready", phaseOf(name, v1alpha1.PhaseReady))
		}
	}
	revKey := func(n string) string { return prefix + "/revisions/profiles/claude/rev/000000000" + n }
	waitKey(t, cli, revKey("1"))
	run(buildbox, 0, "profile/claude\nREVISION  CHANGE-CAUSE\n1         created\n", "", "rollout", "history", "profile/claude")

	old := map[string]string{}
	for _, node := range nodes {
		node.n.waitFor(t, "the panes read", func(ms []v1alpha1.Member) bool {
			for _, m := range ms {
				old[m.Name] = m.Status.PaneID
			}
			return true
		})
	}
	// Each node follows its own members as they change; together they
	// say how many the fleet replaces at once.
	var (
		mu        sync.Mutex
		replacing = map[*fleetNode]int{}
		most      int
	)
	var g errgroup.Group
	for _, node := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		g.Go(func() error {
			return node.n.info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
				now, done := 0, 0
				for _, m := range ms {
					if m.Status.Rollout != "" {
						now++
					}
					if m.Status.PaneID != old[m.Name] && m.Status.Phase == v1alpha1.PhaseReady && m.Status.Rollout == "" {
						done++
					}
				}
				mu.Lock()
				replacing[node.n] = now
				most = max(most, replacing[laptop]+replacing[buildbox])
				mu.Unlock()
				return done == len(node.members)
			})
		})
	}
	run(buildbox, 0, "profile/claude configured\nmember/a1 unchanged\nmember/a2 unchanged\nmember/b1 unchanged\nmember/b2 unchanged\n", "",
		"apply", "-f", rolloutFleet(t, "--model, opus"))
	if err := g.Wait(); err != nil {
		t.Fatalf("not every member replaced: %v", err)
	}
	if most != 1 {
		t.Errorf("the fleet's nodes replaced up to %d members at once; want 1 (maxUnavailable 1)", most)
	}
	run(laptop, 0, "…profile \"claude\" successfully rolled out\n", "", "rollout", "status", "profile/claude", "--timeout=1m")
	waitKey(t, cli, revKey("2"))
	run(laptop, 0, "profile/claude\nREVISION  CHANGE-CAUSE\n1         created\n2         spec.args changed\n", "", "rollout", "history", "profile/claude")

	// Undo through one node writes etcd; the other reads the renumbered
	// history and the fleet rolls back.
	run(laptop, 0, "profile/claude rolled back\n", "", "rollout", "undo", "profile/claude")
	resp, err := cli.Get(context.Background(), prefix+"/profiles/claude")
	if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), "sonnet") {
		t.Fatalf("the profile in etcd after undo: %v %v", resp, err)
	}
	waitKey(t, cli, revKey("3"))
	run(buildbox, 0, "profile/claude\nREVISION  CHANGE-CAUSE\n2         spec.args changed\n3         created\n", "", "rollout", "history", "profile/claude")
	run(buildbox, 0, "…profile \"claude\" successfully rolled out\n", "", "rollout", "status", "profile/claude", "--timeout=1m")

	// Pause through one node, resume through the other.
	run(buildbox, 0, "profile/claude paused\n", "", "rollout", "pause", "profile/claude")
	run(laptop, 1, "", "profile \"claude\" is already paused (conflict)", "rollout", "pause", "profile/claude")
	run(laptop, 0, "profile/claude resumed\n", "", "rollout", "resume", "profile/claude")
}
