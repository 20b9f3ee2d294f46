package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/encode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// applyOptions are `fleetd apply -f`'s.
type applyOptions struct {
	ioStreams
	serverOptions
	files  []string
	dryRun string
}

func newApplyCmd() *cobra.Command {
	o := &applyOptions{}
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|- [--dry-run=server|client]",
		Short: "Create or update Members in a running fleetd from manifest files",
		Long: `apply reads each FILE, the manifest files of each DIR (*.yaml, *.yml, not
recursive) or standard input (-f -), decodes every document the way fleetd
serve reads manifests — a document may also be a List, as fleetd get -o yaml
prints several members, and status and the metadata fleetd owns are ignored —
and sends each Member to the running fleetd (POST /members), which writes it
into its manifests directory: a Member already defined in a file there is
edited in place, only the fields that change, and defaults are never written.
It prints one line per Member: member/NAME created, configured or unchanged.

Nothing is sent unless all input is valid: problems are printed as
FILE:LINE: field: message. Only Members can be applied; Profiles and Tenants
are the operator's files and are edited in the manifests directory itself.

--dry-run=server sends each Member to fleetd, which validates it and checks
its Profile, its Tenant and the file it would write as for a real apply, but
writes nothing; lines end in
"(server dry run)". --dry-run=client only decodes the input here and reads the
live members to say what would happen; lines end in "(dry run)".`,
		Example: `  fleetd apply -f reviewer.yaml
  fleetd apply -f team/ --dry-run=server
  fleetd get members -o yaml | fleetd apply -f -`,
		Args: cobra.NoArgs,
		RunE: runVerb(o),
	}
	cmd.Flags().StringArrayVarP(&o.files, "filename", "f", nil, "manifest file, directory of manifest files, or - for standard input (repeatable)")
	cmd.Flags().StringVar(&o.dryRun, "dry-run", "none", "none, server (fleetd validates and resolves, writes nothing) or client (decode here only)")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *applyOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.serverOptions.complete(cmd)
	return nil
}

func (o *applyOptions) Validate() error {
	if len(o.files) == 0 {
		return fmt.Errorf("-f FILE is required (use -f - for standard input)")
	}
	switch o.dryRun {
	case "none", "server", "client":
		return nil
	}
	return fmt.Errorf("--dry-run: unknown value %q; want none, server or client", o.dryRun)
}

func (o *applyOptions) Run(ctx context.Context) error {
	members, err := o.readMembers(o.files, "apply", "applied")
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	suffix := map[string]string{"server": " (server dry run)", "client": " (dry run)"}[o.dryRun]
	failed := false
	for _, m := range members {
		var result string
		if o.dryRun == "client" {
			result, err = clientDryRun(ctx, c, m)
		} else {
			result, err = c.ApplyMember(ctx, m, o.dryRun == "server")
		}
		if err != nil {
			fmt.Fprintf(o.errOut, "fleetd apply: member/%s: %s\n", m.Name, client.ErrorText(err))
			failed = true
			continue
		}
		fmt.Fprintf(o.out, "member/%s %s%s\n", m.Name, termtext.Line(result), suffix)
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}

// clientDryRun says what applying m would do without sending it: created
// when fleetd has no such member, unchanged when the live definition is
// the same (package api/encode), configured otherwise.
func clientDryRun(ctx context.Context, c *client.Client, m *v1alpha1.Member) (string, error) {
	live, found, err := c.LiveMember(ctx, m.Name)
	if err != nil || !found {
		return "created", err
	}
	want, err := encode.Canonical(m)
	if err != nil {
		return "", err
	}
	got, err := encode.Canonical(live)
	if err != nil {
		return "", err
	}
	if bytes.Equal(want, got) {
		return "unchanged", nil
	}
	return "configured", nil
}
