package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/version"
)

// versionOptions are `fleetd version`'s: none.
type versionOptions struct{ ioStreams }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print fleetd's version",
		Args:  cobra.NoArgs,
		RunE:  runVerb(&versionOptions{}),
	}
}

func (o *versionOptions) Complete(*cobra.Command, []string) error { return nil }
func (o *versionOptions) Validate() error                         { return nil }

func (o *versionOptions) Run(context.Context) error {
	_, err := fmt.Fprintln(o.out, "fleetd", version.Version)
	return err
}
