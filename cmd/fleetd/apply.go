package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/encode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/cli/manifests"
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
		Short: "Create or update Members, Profiles and Tenants in a running fleetd from manifest files",
		Long: `apply reads each FILE, the manifest files of each DIR (*.yaml, *.yml, not
recursive) or standard input (-f -), decodes every document the way fleetd
serve reads manifests — a document may also be a List, as fleetd get -o yaml
prints several objects, and status and the metadata fleetd owns are ignored —
and sends each Member, Profile and Tenant to the running fleetd (POST
/members, /profiles, /tenants), which writes it into its desired state: the
manifests directory, where an object already defined in a file is edited in
place, only the fields that change, and defaults are never written; or etcd.
Profiles and Tenants are sent before the Members, so that what a Member
references exists when it arrives. It prints one line per object:
KIND/NAME created, configured or unchanged (member/reviewer created).

Nothing is sent unless all input is valid: problems are printed as
FILE:LINE: field: message. A Profile or Tenant sent this way keeps any
credential or endpoint setting its stored definition has, but cannot add or
change one (the subscription guard): such a setting is written in the
operator's own manifest file, or put into etcd.

--dry-run=server sends each object to fleetd, which validates it and checks
a Member's Profile and Tenant and what it would write as for a real apply,
but writes nothing; lines end in "(server dry run)". --dry-run=client only
decodes the input here and reads the live objects to say what would happen;
lines end in "(dry run)".`,
		Example: `  fleetd apply -f reviewer.yaml
  fleetd apply -f manifests/ --dry-run=server
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
	objs, err := o.readObjects(o.files, "apply", "applied")
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	suffix := map[string]string{"server": " (server dry run)", "client": " (dry run)"}[o.dryRun]
	failed := false
	for _, obj := range manifests.ForApply(objs) {
		var result string
		if o.dryRun == "client" {
			result, err = clientDryRun(ctx, c, obj)
		} else {
			result, err = c.Apply(ctx, obj, o.dryRun == "server")
		}
		if err != nil {
			fmt.Fprintf(o.errOut, "fleetd apply: %s: %s\n", kindName(obj), client.ErrorText(err))
			failed = true
			continue
		}
		fmt.Fprintf(o.out, "%s %s%s\n", kindName(obj), termtext.Line(result), suffix)
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}

// clientDryRun says what applying obj would do without sending it:
// created when fleetd has no such object, unchanged when the live
// definition is the same (package api/encode), configured otherwise.
func clientDryRun(ctx context.Context, c *client.Client, obj v1alpha1.Object) (string, error) {
	live, found, err := c.Live(ctx, obj.GetObjectKind(), obj.GetName())
	if err != nil || !found {
		return "created", err
	}
	want, err := encode.Canonical(obj)
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
