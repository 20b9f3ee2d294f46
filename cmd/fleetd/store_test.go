package main

import "testing"

// The store flags are checked before anything starts: each mistake is a
// usage error (exit 2) saying what to do.
func TestServe_StoreFlagUsageErrors(t *testing.T) {
	t.Parallel()
	serve := func(args ...string) []string { return append([]string{"serve", "--state-dir", t.TempDir()}, args...) }
	checkUsageErrors(t, []usageCase{
		{"unknown store", serve("--store", "consul"), 2, `fleetd serve: unknown --store "consul"; want directory or etcd`},
		{"etcd flags with the directory store", serve("--node", "a"), 2, "fleetd serve: --node is for --store etcd; the directory store reads --manifests"},
		{"manifests with the etcd store", serve("--store", "etcd", "--manifests", "m", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "a"), 2, "fleetd serve: --manifests is for --store directory"},
		{"no endpoints", serve("--store", "etcd", "--node", "a"), 2, "fleetd serve: the etcd store needs --etcd-endpoints"},
		{"a bad endpoint", serve("--store", "etcd", "--etcd-endpoints", "127.0.0.1:2379", "--node", "a"), 2, `fleetd serve: etcd endpoint "127.0.0.1:2379": want a URL like http://127.0.0.1:2379`},
		{"no node", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379"), 2, "fleetd serve: --node: a node needs a name"},
		{"a bad node name", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "Big Box"), 2, `fleetd serve: --node: node name "Big Box"`},
		{"node labels with the directory store", serve("--node-labels", "a=b"), 2, "fleetd serve: --node-labels is for --store etcd"},
		{"max members with the directory store", serve("--max-members", "3"), 2, "fleetd serve: --max-members is for --store etcd"},
		{"a node label without =", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "a", "--node-labels", "gpu"), 2, `fleetd serve: --node-labels: "gpu": want key=value`},
		{"a node label with an empty key", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "a", "--node-labels", "=x"), 2, `fleetd serve: --node-labels: "=x": empty key`},
		{"a node label twice", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "a", "--node-labels", "a=1,a=2"), 2, `fleetd serve: --node-labels: key "a" given twice`},
		{"a node label with a control character", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "a", "--node-labels", "a=x\x07"), 2, "fleetd serve: --node-labels: metadata.labels[a]: invalid label"},
		{"negative max members", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "a", "--max-members", "-1"), 2, "fleetd serve: --max-members -1: want 0 (no limit) or more"},
		{"reschedule-after with the directory store", serve("--reschedule-after", "1m"), 2, "fleetd serve: --reschedule-after is for --store etcd"},
		{"a zero reschedule-after", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "a", "--reschedule-after", "0s"), 2, "fleetd serve: --reschedule-after 0s: want a positive duration, e.g. 5m"},
		{"fence-policy with the directory store", serve("--fence-policy", "pause"), 2, "fleetd serve: --fence-policy is for --store etcd"},
		{"an unknown fence policy", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "a", "--fence-policy", "stop"), 2, `fleetd serve: --fence-policy "stop": want close (the default`},
		{"a certificate without its key", serve("--store", "etcd", "--etcd-endpoints", "https://127.0.0.1:2379", "--node", "a", "--etcd-cert", "c.pem"), 2, "fleetd serve: --etcd-cert and --etcd-key go together"},
	})
}

// The environment stands in for every store flag.
func TestServe_StoreFlagsFromTheEnvironment(t *testing.T) {
	t.Setenv("FLEETD_STORE", "etcd")
	t.Setenv("FLEETD_ETCD_ENDPOINTS", "http://127.0.0.1:2379")
	checkUsageErrors(t, []usageCase{
		{"FLEETD_STORE and FLEETD_ETCD_ENDPOINTS without a node", []string{"serve", "--state-dir", t.TempDir()}, 2, "fleetd serve: --node: a node needs a name"},
	})
	t.Setenv("FLEETD_NODE", "a")
	t.Setenv("FLEETD_NODE_LABELS", "gpu")
	checkUsageErrors(t, []usageCase{
		{"FLEETD_NODE_LABELS", []string{"serve", "--state-dir", t.TempDir()}, 2, `fleetd serve: --node-labels: "gpu": want key=value`},
	})
	t.Setenv("FLEETD_NODE_LABELS", "gpu=a100")
	t.Setenv("FLEETD_MAX_MEMBERS", "many")
	checkUsageErrors(t, []usageCase{
		{"FLEETD_MAX_MEMBERS", []string{"serve", "--state-dir", t.TempDir()}, 2, `fleetd serve: FLEETD_MAX_MEMBERS="many": want a whole number`},
	})
	t.Setenv("FLEETD_MAX_MEMBERS", "")
	t.Setenv("FLEETD_RESCHEDULE_AFTER", "soon")
	checkUsageErrors(t, []usageCase{
		{"FLEETD_RESCHEDULE_AFTER", []string{"serve", "--state-dir", t.TempDir()}, 2, `fleetd serve: FLEETD_RESCHEDULE_AFTER="soon": want a positive duration, e.g. 5m`},
	})
	t.Setenv("FLEETD_RESCHEDULE_AFTER", "")
	t.Setenv("FLEETD_FENCE_POLICY", "freeze")
	checkUsageErrors(t, []usageCase{
		{"FLEETD_FENCE_POLICY", []string{"serve", "--state-dir", t.TempDir()}, 2, `fleetd serve: --fence-policy "freeze": want close`},
	})
	t.Setenv("FLEETD_FENCE_POLICY", "")
	t.Setenv("FLEETD_NODE", "Not Valid")
	checkUsageErrors(t, []usageCase{
		{"FLEETD_NODE", []string{"serve", "--state-dir", t.TempDir()}, 2, `fleetd serve: --node: node name "Not Valid"`},
	})
}
