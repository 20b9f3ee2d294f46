package daemon

import (
	"cmp"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/internal/console"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
	"github.com/fleetd-dev/fleetd/internal/fleetmsg"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/mcp"
)

// messenger is the messaging the gateway and the console use: the core,
// or with the etcd store the relay over it.
type messenger interface {
	mcp.Messenger
	console.Messenger
}

// newRelay is the gateway's messaging on a fleet in etcd: the node's core
// for its own members, etcd for the others' (package fleetmsg). A member's
// node is its binding as the fleet store last read it; its messaging state
// is what that node publishes (fleetView.RemoteWorker).
func newRelay(core *messaging.Core, cli *clientv3.Client, fleet *etcdstore.Store, view *fleetView, cfg *EtcdConfig, mopts messaging.Options, log *slog.Logger) (*fleetmsg.Relay, error) {
	return fleetmsg.New(core, &fleetmsg.Options{
		Client: cli, Prefix: cmp.Or(cfg.Prefix, etcdstore.DefaultPrefix), Node: cfg.Node,
		Locate: func(member string) (string, bool) {
			b, ok := fleet.Bound(member)
			return b.Node, ok
		},
		RemoteStatus: func(member, _ string) (messaging.WorkerStatus, bool) { return view.RemoteWorker(member) },
		PrimaryName:  mcp.PrimaryName, Logger: log, RequestTimeout: cfg.RequestTimeout,
		DefaultTimeout: mopts.DefaultTimeout, MaxContentBytes: mopts.MaxContentBytes, MaxPollBytes: mopts.MaxPollBytes,
		MaxMailboxMessages: mopts.MaxMailboxMessages, // the fleet mailbox's bytes stay fleetmsg's (etcd holds them)
	})
}
