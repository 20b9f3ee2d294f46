package main

import "testing"

// The store flags are checked before anything starts: each mistake is a
// usage error (exit 2) saying what to do.
func TestServe_StoreFlagUsageErrors(t *testing.T) {
	serve := func(args ...string) []string { return append([]string{"serve", "--state-dir", t.TempDir()}, args...) }
	checkUsageErrors(t, []usageCase{
		{"unknown store", serve("--store", "consul"), 2, `fleetd serve: unknown --store "consul"; want directory or etcd`},
		{"etcd flags with the directory store", serve("--node", "a"), 2, "fleetd serve: --node is for --store etcd; the directory store reads --manifests"},
		{"manifests with the etcd store", serve("--store", "etcd", "--manifests", "m", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "a"), 2, "fleetd serve: --manifests is for --store directory"},
		{"no endpoints", serve("--store", "etcd", "--node", "a"), 2, "fleetd serve: the etcd store needs --etcd-endpoints"},
		{"a bad endpoint", serve("--store", "etcd", "--etcd-endpoints", "127.0.0.1:2379", "--node", "a"), 2, `fleetd serve: etcd endpoint "127.0.0.1:2379": want a URL like http://127.0.0.1:2379`},
		{"no node", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379"), 2, "fleetd serve: --node: a node needs a name"},
		{"a bad node name", serve("--store", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--node", "Big Box"), 2, `fleetd serve: --node: node name "Big Box"`},
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
	t.Setenv("FLEETD_NODE", "Not Valid")
	checkUsageErrors(t, []usageCase{
		{"FLEETD_NODE", []string{"serve", "--state-dir", t.TempDir()}, 2, `fleetd serve: --node: node name "Not Valid"`},
	})
}
