package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/internal/migrate"
)

// migrateOptions are `fleetd migrate DIR`'s, the one-shot rewrite of
// legacy manifests. It goes away with package migrate.
type migrateOptions struct {
	ioStreams
	dir  string
	opts migrate.Options
}

func newMigrateCmd() *cobra.Command {
	o := &migrateOptions{}
	cmd := &cobra.Command{
		Use:   "migrate DIR [--dry-run]",
		Short: "Rewrite legacy Member manifests (spec.mcpTransport) to spec.mcpTarget and spec.transport",
		Long: `Migrate rewrites, in place, every Member in the manifest files directly in
DIR that still carries the legacy spec.mcpTransport field: a tenant entry
becomes spec.mcpTarget {kind: tenant, tenantId} plus spec.transport
streamable-http; a resident entry is removed (no mcpTarget means resident).
Comments, key order and everything else in the files stay as written.

It prints each change as FILE:LINE: member NAME: BEFORE → AFTER. Each file is
replaced atomically. If any entry cannot be rewritten faithfully, it prints
the problems, writes nothing and exits 1. Running it again changes nothing.`,
		Example: `  fleetd migrate manifests/ --dry-run
  fleetd migrate manifests/`,
		Args: requireDirArg,
		RunE: runVerb(o),
	}
	cmd.Flags().BoolVar(&o.opts.DryRun, "dry-run", false, "print the changes without writing anything")
	return cmd
}

func (o *migrateOptions) Complete(_ *cobra.Command, args []string) error {
	o.dir = args[0]
	return nil
}

func (o *migrateOptions) Validate() error { return nil }

// Run prints the changes (or problems) on the output, one per line, then
// what happened: on the error stream when it failed, else on the output.
func (o *migrateOptions) Run(context.Context) error {
	changes, err := migrate.Dir(o.dir, &o.opts)
	for _, c := range changes {
		fmt.Fprintln(o.out, c)
	}
	var problems decode.ErrorList
	switch {
	case errors.As(err, &problems):
		for _, p := range problems {
			fmt.Fprintln(o.out, p)
		}
		fmt.Fprintf(o.errOut, "fleetd migrate: %s in %s; nothing was written\n", plural(len(problems), "problem"), o.dir)
		return &exitError{code: 1}
	case err != nil:
		fmt.Fprintf(o.errOut, "fleetd migrate: %v\n", err)
		return &exitError{code: 1}
	case len(changes) == 0:
		fmt.Fprintf(o.out, "%s: nothing to migrate\n", o.dir)
	case o.opts.DryRun:
		fmt.Fprintf(o.out, "dry run: %s in %s would change; nothing was written\n", plural(len(changes), "member"), filesIn(changes))
	default:
		fmt.Fprintf(o.out, "migrated %s in %s; check them with: fleetd validate %s\n", plural(len(changes), "member"), filesIn(changes), o.dir)
	}
	return nil
}

// filesIn counts the distinct files of changes, as "1 file" or "N files".
func filesIn(changes []migrate.Change) string {
	files := map[string]bool{}
	for _, c := range changes {
		files[c.File] = true
	}
	return plural(len(files), "file")
}
