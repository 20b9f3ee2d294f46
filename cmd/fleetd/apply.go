package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/encode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/manifests"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

func newApplyCmd() *cobra.Command {
	var flags clientFlags
	var files []string
	var dryRun string
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usageErrorf(cmd, "-f FILE is required (use -f - for standard input)")
			}
			suffix := ""
			switch dryRun {
			case "none":
			case "server":
				suffix = " (server dry run)"
			case "client":
				suffix = " (dry run)"
			default:
				return usageErrorf(cmd, "--dry-run: unknown value %q; want none, server or client", dryRun)
			}
			members, err := manifests.ReadMembers(cmd.InOrStdin(), files, "apply")
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), err)
				fmt.Fprintf(cmd.ErrOrStderr(), "fleetd apply: nothing was applied\n")
				return &exitError{code: 1}
			}
			c, err := flags.client()
			if err != nil {
				return err
			}
			path := "/members"
			if dryRun == "server" {
				path += "?dryRun=All"
			}
			failed := false
			for _, m := range members {
				var result string
				if dryRun == "client" {
					result, err = clientDryRun(cmd.Context(), c, m)
				} else {
					var res mcp.WriteResult
					var status int
					status, err = c.post(cmd.Context(), path, m, &res)
					result = res.Result
					if err == nil && result == "" && status == http.StatusCreated {
						result = "created"
					}
				}
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "fleetd apply: member/%s: %s\n", m.Name, describeHTTPError(err))
					failed = true
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "member/%s %s%s\n", m.Name, termtext.Line(result), suffix)
			}
			if failed {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file, directory of manifest files, or - for standard input (repeatable)")
	cmd.Flags().StringVar(&dryRun, "dry-run", "none", "none, server (fleetd validates and resolves, writes nothing) or client (decode here only)")
	flags.register(cmd)
	return cmd
}

// clientDryRun says what applying m would do without sending it: created
// when fleetd has no such member, unchanged when the live definition is
// the same (package api/encode), configured otherwise.
func clientDryRun(ctx context.Context, c *apiClient, m *v1alpha1.Member) (string, error) {
	live, found, err := getLiveMember(ctx, c, m.Name)
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

// getLiveMember reads a member from the running fleetd; found is false
// when fleetd has none by that name.
func getLiveMember(ctx context.Context, c *apiClient, name string) (m *v1alpha1.Member, found bool, err error) {
	m = &v1alpha1.Member{}
	if err := c.get(ctx, "/members/"+url.PathEscape(name), m); err != nil {
		var he *httpError
		if errors.As(err, &he) && he.status == http.StatusNotFound {
			return nil, false, nil
		}
		return nil, false, err
	}
	return m, true, nil
}

// describeHTTPError is a REST failure as one line: "CODE: message" when
// fleetd sent a code word, else the error; safe for a terminal (package
// termtext).
func describeHTTPError(err error) string {
	var he *httpError
	if errors.As(err, &he) && he.code != "" {
		return termtext.Line(he.code + ": " + he.msg)
	}
	return err.Error()
}
