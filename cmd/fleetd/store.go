package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/daemon"
)

// storeOptions are serve's choice of desired-state store and, for the etcd
// store, where etcd is and which node this fleetd is. Every flag has an
// environment variable, for a unit file or a container.
type storeOptions struct {
	store       string
	endpoints   string
	prefix      string
	node        string
	nodeLabels  string
	maxMembers  int
	fencePolicy string
	caCert      string
	cert        string
	key         string

	rescheduleAfter time.Duration

	changed                           func(flag string) bool
	maxMembersEnv, rescheduleAfterEnv string // parsed by validate
}

// etcdFlags are the flags of the etcd store only.
var etcdFlags = []string{"etcd-endpoints", "etcd-prefix", "node", "node-labels", "max-members", "reschedule-after", "fence-policy", "etcd-cacert", "etcd-cert", "etcd-key"}

func (s *storeOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.store, "store", "directory", "where the desired state is kept: directory (--manifests) or etcd (--etcd-endpoints, --node) (env FLEETD_STORE)")
	f.StringVar(&s.endpoints, "etcd-endpoints", "", "with --store etcd: etcd's client URLs, comma-separated (env FLEETD_ETCD_ENDPOINTS)")
	f.StringVar(&s.prefix, "etcd-prefix", daemon.DefaultEtcdPrefix, "with --store etcd: the key prefix the fleet lives under (env FLEETD_ETCD_PREFIX)")
	f.StringVar(&s.node, "node", "", "with --store etcd: this fleetd's node name, unique in the fleet (env FLEETD_NODE)")
	f.StringVar(&s.nodeLabels, "node-labels", "", "with --store etcd: this node's labels, k=v,k2=v2 (env FLEETD_NODE_LABELS)")
	f.IntVar(&s.maxMembers, "max-members", 0, "with --store etcd: how many members this node runs at most; 0 is no limit (env FLEETD_MAX_MEMBERS)")
	f.DurationVar(&s.rescheduleAfter, "reschedule-after", daemon.DefaultRescheduleAfter, "with --store etcd: how long the members of a lost node (lease expired) wait for it before they are placed elsewhere; members with spec.nodeName wait for ever (env FLEETD_RESCHEDULE_AFTER)")
	f.StringVar(&s.fencePolicy, "fence-policy", daemon.DefaultFencePolicy, "with --store etcd: what this node does with the panes of the members another node may take over, once it could not confirm its lease for --reschedule-after less a margin: close (never two agents for one member) or pause (interrupt their agents with Esc and keep their panes and conversations; the member has a second, idle agent until the node is back) (env FLEETD_FENCE_POLICY)")
	f.StringVar(&s.caCert, "etcd-cacert", "", "with --store etcd: PEM file of the CA that signed etcd's server certificate (env FLEETD_ETCD_CACERT)")
	f.StringVar(&s.cert, "etcd-cert", "", "with --store etcd: PEM file of this node's client certificate (env FLEETD_ETCD_CERT)")
	f.StringVar(&s.key, "etcd-key", "", "with --store etcd: PEM file of the client certificate's key (env FLEETD_ETCD_KEY)")
}

// complete reads the environment variable of every flag not given.
func (s *storeOptions) complete(cmd *cobra.Command) {
	s.changed = cmd.Flags().Changed
	for _, e := range []struct {
		flag, env string
		v         *string
	}{
		{"store", "FLEETD_STORE", &s.store}, {"etcd-endpoints", "FLEETD_ETCD_ENDPOINTS", &s.endpoints},
		{"etcd-prefix", "FLEETD_ETCD_PREFIX", &s.prefix}, {"node", "FLEETD_NODE", &s.node},
		{"node-labels", "FLEETD_NODE_LABELS", &s.nodeLabels}, {"etcd-cacert", "FLEETD_ETCD_CACERT", &s.caCert},
		{"etcd-cert", "FLEETD_ETCD_CERT", &s.cert}, {"etcd-key", "FLEETD_ETCD_KEY", &s.key},
		{"fence-policy", "FLEETD_FENCE_POLICY", &s.fencePolicy},
	} {
		fromEnv(cmd, e.flag, e.env, e.v)
	}
	if !s.changed("max-members") {
		s.maxMembersEnv = os.Getenv("FLEETD_MAX_MEMBERS")
	}
	if !s.changed("reschedule-after") {
		s.rescheduleAfterEnv = os.Getenv("FLEETD_RESCHEDULE_AFTER")
	}
}

// validate sets cfg's store from the options, or returns a usage error.
func (s *storeOptions) validate(cfg *daemon.Config) error {
	switch s.store {
	case "directory":
		for _, name := range etcdFlags {
			if s.changed(name) {
				return fmt.Errorf("--%s is for --store etcd; the directory store reads --manifests", name)
			}
		}
		return nil
	case "etcd":
	default:
		return fmt.Errorf("unknown --store %q; want directory or etcd", s.store)
	}
	if s.changed("manifests") {
		return fmt.Errorf("--manifests is for --store directory; with --store etcd the desired state is in etcd (apply it with `fleetd apply`)")
	}
	var endpoints []string
	for _, e := range strings.Split(s.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	labels, err := parseNodeLabels(s.nodeLabels)
	if err != nil {
		return fmt.Errorf("--node-labels: %w", err)
	}
	maxMembers := s.maxMembers
	if v := s.maxMembersEnv; v != "" {
		if maxMembers, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("FLEETD_MAX_MEMBERS=%q: want a whole number (0 is no limit)", v)
		}
	}
	rescheduleAfter := s.rescheduleAfter
	if v := s.rescheduleAfterEnv; v != "" {
		if rescheduleAfter, err = time.ParseDuration(v); err != nil || rescheduleAfter <= 0 {
			return fmt.Errorf("FLEETD_RESCHEDULE_AFTER=%q: want a positive duration, e.g. 5m", v)
		}
	}
	if rescheduleAfter <= 0 {
		return fmt.Errorf("--reschedule-after %s: want a positive duration, e.g. 5m", rescheduleAfter)
	}
	cfg.ManifestsDir = "" // no directory: the desired state is in etcd
	cfg.Etcd = &daemon.EtcdConfig{Endpoints: endpoints, Prefix: s.prefix, Node: s.node, NodeLabels: labels, MaxMembers: maxMembers,
		RescheduleAfter: rescheduleAfter, FencePolicy: daemon.FencePolicy(s.fencePolicy), CACert: s.caCert, Cert: s.cert, Key: s.key}
	return cfg.Etcd.Check()
}

// parseNodeLabels reads --node-labels: k=v pairs separated by commas, each
// key once. The labels are then checked as a Member's are
// (daemon.EtcdConfig.Check).
func parseNodeLabels(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	labels := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%q: want key=value", pair)
		case k == "":
			return nil, fmt.Errorf("%q: empty key", pair)
		}
		if _, dup := labels[k]; dup {
			return nil, fmt.Errorf("key %q given twice", k)
		}
		labels[k] = v
	}
	return labels, nil
}
