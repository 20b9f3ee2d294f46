package multihost

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// cli runs the fleetd binary's command line against node n, with the
// fleet's primary token: its exit code, stdout and stderr.
func (n *fleetNode) cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(fleetdBinary(t), args...)
	cmd.Env = append(os.Environ(), "FLEETD_SERVER="+n.info.URL, "FLEETD_TOKEN="+n.token)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	}
	t.Fatalf("fleetd %s: %v", strings.Join(args, " "), err)
	return 0, "", ""
}

// `fleetd apply -f manifests/` — the example directory, Profiles, a Tenant
// and Members — on a fleet on etcd, as `make run-cluster` runs one: every
// object is written under its key through one node and read back by the
// other; applying again changes nothing and diff agrees; delete -f refuses
// the Profiles while Members use them, and removes Members first. Issue
// 23: apply refused the example directory, and the docs said to etcdctl
// put Profiles and Tenants.
func TestApply_TheExampleDirectoryOnAFleetOnEtcd(t *testing.T) {
	prefix := uniquePrefix("/apply-examples")
	laptop := startNode(t, prefix, "laptop")
	buildbox := startNode(t, prefix, "buildbox")
	const examples = "../../manifests"
	run := func(n *fleetNode, wantCode int, wantOut, wantErr string, args ...string) {
		t.Helper()
		code, stdout, stderr := n.cli(t, args...)
		if code != wantCode || stdout != wantOut || !strings.Contains(stderr, wantErr) || wantErr == "" && stderr != "" {
			t.Fatalf("fleetd %s: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s\nstderr containing %q",
				strings.Join(args, " "), code, stdout, stderr, wantCode, wantOut, wantErr)
		}
	}
	objects := []string{"profile/claude", "profile/codex", "tenant/acme", "member/acme-triage", "member/builder", "member/docs-writer", "member/reviewer"}
	lines := func(word string, names []string) string {
		var b strings.Builder
		for _, n := range names {
			b.WriteString(n + " " + word + "\n")
		}
		return b.String()
	}

	run(laptop, 0, lines("created", objects), "", "apply", "-f", examples)
	resp, err := etcdClient(t).Get(context.Background(), prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = true
	}
	for _, k := range []string{"/profiles/claude", "/profiles/codex", "/tenants/acme", "/members/acme-triage", "/members/reviewer"} {
		if !keys[prefix+k] {
			t.Errorf("no key %s%s after apply", prefix, k)
		}
	}
	// The other node reads what the first wrote.
	run(buildbox, 0, lines("unchanged", objects), "", "apply", "-f", examples)
	run(buildbox, 0, "", "", "diff", "-f", examples)

	run(laptop, 1, "", "fleetd delete: profile/claude: conflict: delete Profile/claude: referenced by member/acme-triage (spec.profile), member/builder (spec.profile), member/docs-writer (spec.profile); ",
		"delete", "-f", examples+"/profiles.yaml")
	run(laptop, 0, lines("deleted", []string{"member/acme-triage", "member/builder", "member/docs-writer", "member/reviewer", "tenant/acme", "profile/claude", "profile/codex"}), "",
		"delete", "-f", examples)
	resp, err = etcdClient(t).Get(context.Background(), prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		for _, dir := range []string{"/members/", "/profiles/", "/tenants/"} {
			// A deleted member's tombstone stays, under a lease: it is no object.
			if strings.HasPrefix(string(kv.Key), prefix+dir) && !strings.HasPrefix(string(kv.Key), prefix+"/members/.deleted/") {
				t.Errorf("key %s outlived delete -f", kv.Key)
			}
		}
	}
}
