package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/mcp"
)

func newDeleteCmd() *cobra.Command {
	var flags clientFlags
	var files []string
	var ignoreNotFound bool
	cmd := &cobra.Command{
		Use:   "delete member NAME | delete -f FILE|DIR|-",
		Short: "Delete a Member from a running fleetd; its tab is closed",
		Long: `delete removes the Member's manifest from the directory fleetd serve watches
(DELETE /members/NAME); fleetd then closes its tab and revokes its token.
NAME may also be the member's pane id, terminal id or session id.

With -f, it deletes every Member the files define (read as apply reads
them: files, directories, - for standard input, Lists); a member fleetd does
not have is reported, the others are still deleted, and the exit status is
1 (0 with --ignore-not-found).`,
		Example: `  fleetd delete member reviewer
  fleetd delete -f reviewer.yaml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(files) > 0 {
				if len(args) > 0 {
					return usageErrorf(cmd, "-f takes no resource or name arguments, got %d", len(args))
				}
				return nil
			}
			if len(args) != 2 {
				return usageErrorf(cmd, "want a resource type and a name, got %d arguments", len(args))
			}
			if !isMembersResource(args[0]) {
				return usageErrorf(cmd, "unknown resource type %q; fleetd deletes: member", args[0])
			}
			return nil
		},
		ValidArgsFunction: completeResourceNamesOf(&flags, memberResource),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) > 0 {
				return deleteFiles(cmd, &flags, files, ignoreNotFound)
			}
			name := args[1]
			c, err := flags.client()
			if err != nil {
				return err
			}
			var res mcp.WriteResult
			if err := c.delete(cmd.Context(), "/members/"+url.PathEscape(name), &res); err != nil {
				var he *httpError
				if errors.As(err, &he) && he.status == http.StatusNotFound {
					fmt.Fprintf(cmd.ErrOrStderr(), "fleetd delete: member %q not found\n", name)
				} else {
					fmt.Fprintf(cmd.ErrOrStderr(), "fleetd delete: member/%s: %s\n", name, describeHTTPError(err))
				}
				return &exitError{code: 1}
			}
			if res.Member.Name != "" {
				name = res.Member.Name
			}
			fmt.Fprintf(cmd.OutOrStdout(), "member/%s deleted\n", name)
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "delete the Members these manifest files or directories define (repeatable; - for standard input)")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "with -f, a member fleetd does not have is not an error")
	flags.register(cmd)
	return cmd
}
