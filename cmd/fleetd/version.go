package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/version"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print fleetd's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "fleetd", version.Version)
			return err
		},
	}
}
