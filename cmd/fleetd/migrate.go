package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/internal/migrate"
)

// newMigrateCmd is `fleetd migrate`, the one-shot rewrite of legacy
// manifests. It goes away with package migrate.
func newMigrateCmd() *cobra.Command {
	var opts migrate.Options
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
		RunE: func(cmd *cobra.Command, args []string) error {
			return migrateDir(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], opts)
		},
	}
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print the changes without writing anything")
	return cmd
}

// migrateDir runs `fleetd migrate DIR`: changes (or problems) on out, one
// per line, then what happened on errOut when it failed, or a closing line
// on out.
func migrateDir(out, errOut io.Writer, dir string, opts migrate.Options) error {
	changes, err := migrate.Dir(dir, &opts)
	for _, c := range changes {
		fmt.Fprintln(out, c)
	}
	var problems decode.ErrorList
	switch {
	case errors.As(err, &problems):
		for _, p := range problems {
			fmt.Fprintln(out, p)
		}
		fmt.Fprintf(errOut, "fleetd migrate: %s in %s; nothing was written\n", plural(len(problems), "problem"), dir)
		return &exitError{code: 1}
	case err != nil:
		fmt.Fprintf(errOut, "fleetd migrate: %v\n", err)
		return &exitError{code: 1}
	case len(changes) == 0:
		fmt.Fprintf(out, "%s: nothing to migrate\n", dir)
	case opts.DryRun:
		fmt.Fprintf(out, "dry run: %s in %s would change; nothing was written\n", plural(len(changes), "member"), filesIn(changes))
	default:
		fmt.Fprintf(out, "migrated %s in %s; check them with: fleetd validate %s\n", plural(len(changes), "member"), filesIn(changes), dir)
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
