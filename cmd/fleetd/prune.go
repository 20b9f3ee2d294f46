package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/cli/printers"
)

// pruneOptions are `fleetd prune`'s.
type pruneOptions struct {
	ioStreams
	serverOptions
	outputOptions
	confirm bool
	args    []string
}

func newPruneCmd() *cobra.Command {
	o := &pruneOptions{}
	cmd := &cobra.Command{
		Use:   "prune [--confirm]",
		Short: "Show the members whose prune fleetd holds, or confirm it (--confirm)",
		Long: `When one change removes the definitions of more than half of a node's members
(and at least 3) without a delete through fleetd — a manifests directory
emptied, a file of most members removed, a git checkout of another branch,
member keys deleted from etcd by hand — fleetd holds the prune: the members keep
running on their last definition (ManifestValid False, reason PruneHeld, and a
PruneHeld event) until the prune is confirmed, or until it has been held for
serve's --prune-hold (default 2m), when it goes ahead. Defining a held member
again keeps it; deleting it (fleetd delete member NAME) prunes it alone.

prune lists what the running fleetd holds: MEMBER, how long it has been HELD,
how long until it is PRUNED IN by itself, and the SOURCE its definition was in
(-o wide adds why). --confirm prunes every held member now and names them. In a
fleet on etcd each node holds its own members: ask each node (--server).`,
		Example: `  fleetd prune
  fleetd prune --confirm`,
		Args: cobra.ArbitraryArgs, // Validate checks them
		RunE: runVerb(o),
	}
	cmd.Flags().BoolVar(&o.confirm, "confirm", false, "prune every held member now")
	o.outputOptions.addFlags(cmd, "wide", "yaml", "json")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *pruneOptions) Complete(cmd *cobra.Command, args []string) error {
	o.serverOptions.complete(cmd)
	o.args = args
	return nil
}

func (o *pruneOptions) Validate() error {
	if len(o.args) != 0 {
		return fmt.Errorf("prune takes no arguments, got %d (it confirms every held member: fleetd delete member NAME prunes one)", len(o.args))
	}
	if o.confirm && o.output != "" {
		return fmt.Errorf("-o is for listing what is held, not with --confirm")
	}
	return o.outputOptions.validate()
}

// Run lists the held prune, or confirms it.
func (o *pruneOptions) Run(ctx context.Context) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	if !o.confirm {
		list, err := c.PruneHold(ctx)
		if err != nil {
			return o.fail("prune", "%v", err)
		}
		if err := printers.PrintPruneHold(o.out, list, o.format, time.Now()); err != nil {
			return err
		}
		if len(list.Items) > 0 && o.output == "" {
			fmt.Fprintf(o.errOut, "`%s` prunes them now; defining one again keeps it\n", o.command("prune", "--confirm"))
		}
		return nil
	}
	pruned, err := c.ConfirmPrune(ctx)
	if err != nil {
		return o.fail("prune", "%v", err)
	}
	if len(pruned) == 0 {
		fmt.Fprintln(o.out, "No prune was held; nothing pruned.")
		return nil
	}
	for _, name := range pruned {
		fmt.Fprintf(o.out, "member/%s pruned\n", name)
	}
	return nil
}
