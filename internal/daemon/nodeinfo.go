package daemon

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// nodeRefresh is how often a node looks again at what it publishes about
// its herdr (and its member count, which also wakes it on change). It
// asks the controllers whether herdr is reachable and reads herdr's
// version from the daemon's own metrics — nothing is asked of herdr or
// etcd — and writes its registration only when something changed.
const nodeRefresh = 2 * time.Second

// herdrSeen is what the daemon knows of herdr: reachable as synced says
// (the controllers' own view, the one fleetd_herdr_up exports), version and
// protocol from fleetd_herdr_info's labels (herdr's last ping), which the
// cache exports and nothing else gives.
func herdrSeen(g prometheus.Gatherer, synced func() bool) v1alpha1.NodeHerdr {
	h := v1alpha1.NodeHerdr{Reachable: synced()}
	families, _ := g.Gather() // a failed collector leaves its family out; what is there still counts
	for _, f := range families {
		if f.GetName() != "fleetd_herdr_info" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetGauge().GetValue() != 1 {
				continue
			}
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "version":
					h.Version = l.GetValue()
				case "protocol":
					h.Protocol, _ = strconv.Atoi(l.GetValue())
				}
			}
		}
	}
	return h
}

// nodeCoalesce is the least time between two rewrites of a node's
// registration for its member count: while the count changes fast (a
// fleet of hundreds converging), the changes of one second go into one
// write, the last value always written — not one write to etcd per
// member.
const nodeCoalesce = time.Second

// nodeUpdater is what publishNode needs of the node's registration
// (*etcdstore.Node).
type nodeUpdater interface {
	Update(ctx context.Context, change func(*etcdstore.NodeInfo)) error
}

// publishNode keeps the node's registration current with its herdr and its
// member count (members) until ctx ends: woken by every change of the
// desired state and every nodeRefresh, it writes only what changed, and
// at most once per nodeCoalesce — a change less than that after the last
// write waits out the rest, then the value as it is then is written —
// except that herdr becoming reachable or unreachable is written at once.
func publishNode(ctx context.Context, node nodeUpdater, g prometheus.Gatherer, herdrSynced func() bool, members func() int, changed func() <-chan struct{}, clk clock.Clock, log *slog.Logger) {
	failing := false
	var lastWrite time.Time // when what was published last changed
	var last struct {
		h       v1alpha1.NodeHerdr
		members int
		set     bool
	}
	for {
		ch := changed()
		h := herdrSeen(g, herdrSynced)
		n := members()
		if !last.set || n != last.members || h.Reachable != last.h.Reachable || h.Version != last.h.Version || h.Protocol != last.h.Protocol {
			lastWrite = clk.Now()
		}
		err := node.Update(ctx, func(info *etcdstore.NodeInfo) {
			since := info.Herdr.Since
			info.Herdr, info.Members = h, n
			info.Herdr.Since = since // Update moves it when Reachable changes
		})
		if err == nil {
			last.h, last.members, last.set = h, n, true
		}
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			log.Warn("update the node's registration in etcd; retrying", "err", err)
			failing = true
		case err == nil && failing:
			log.Info("node registration updated again")
			failing = false
		}
		t := clk.NewTimer(nodeRefresh)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-ch:
		case <-t.C():
		}
		t.Stop()
		// The count's rewrite waits out nodeCoalesce after the last one;
		// herdr's reachability, which makes the node Ready or not for the
		// scheduler, does not: a change of it ends the wait.
		if wait := lastWrite.Add(nodeCoalesce).Sub(clk.Now()); wait > 0 {
			t := clk.NewTimer(wait)
		coalesce:
			for {
				ch := changed()
				if herdrSynced() != last.h.Reachable {
					break
				}
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C():
					break coalesce
				case <-ch:
				}
			}
			t.Stop()
		}
	}
}
