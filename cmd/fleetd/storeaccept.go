package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// storeAcceptOptions are `fleetd store accept`'s.
type storeAcceptOptions struct {
	ioStreams
	stateDir *string
}

func newStoreCmd() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Manage what a node of a fleet on etcd remembers of its store",
		Args:  cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&stateDir, "state-dir", defaultStateDir(), "the node's state directory")
	cmd.AddCommand(&cobra.Command{
		Use:   "accept",
		Short: "Accept, at the next start, the etcd the node finds as its fleet's store (after etcd was restored)",
		Long: `A node of a fleet on etcd (serve --store etcd) remembers, in its state directory,
the fleet's identity (the key PREFIX/identity) and the highest etcd revision it
has seen. An etcd without that identity, with another one, or behind that
revision — restored empty, restored from an older backup, another fleet's — is
lost to the node: it prunes and creates nothing, /readyz fails with the reason,
and its members show StoreUnavailable, until an operator accepts the etcd.

accept takes the state directory's lock (so fleetd must be stopped) and makes
the node forget the identity and the revision: at its next start it takes the
etcd it finds as its fleet's store (and writes a new identity into an empty
one). It keeps the members it ran: those the accepted etcd lacks are held for
--prune-hold, not pruned at once — apply them again (fleetd apply -f) to keep
them, or confirm (fleetd prune --confirm). In a fleet, accept on each node.`,
		Example: `  fleetd store accept --state-dir ~/.local/state/fleetd`,
		Args:    cobra.NoArgs,
		RunE:    runVerb(&storeAcceptOptions{stateDir: &stateDir}),
	})
	return cmd
}

func (o *storeAcceptOptions) Complete(*cobra.Command, []string) error { return nil }
func (o *storeAcceptOptions) Validate() error                         { return nil }

// Run forgets the node's fleet identity and revision under the state
// directory's lock.
func (o *storeAcceptOptions) Run(context.Context) error {
	layout, lock, err := lockStateDir(*o.stateDir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	acc, err := etcdstore.Accept(layout.Root())
	if err != nil {
		return o.fail("store accept", "%v", err)
	}
	if acc.Lost != "" {
		fmt.Fprintf(o.out, "this node had found etcd lost: %s\n", termtext.Line(acc.Lost))
	}
	fmt.Fprintf(o.out, "forgot fleet %s and revision %d: the next `fleetd serve --state-dir %s` accepts the etcd it finds as its fleet's store\n",
		acc.Identity, acc.Revision, layout.Root())
	return nil
}
