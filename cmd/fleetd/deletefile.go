package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/cli/manifests"
	"github.com/fleetd-dev/fleetd/mcp"
)

// deleteFiles is `fleetd delete -f`: DELETE /members/NAME for every Member
// the files define, in file order. A member fleetd does not have is
// reported (unless ignoreNotFound) and the rest are still deleted; any
// failure makes the exit status 1. Invalid input deletes nothing.
func deleteFiles(cmd *cobra.Command, flags *clientFlags, files []string, ignoreNotFound bool) error {
	members, err := manifests.ReadMembers(cmd.InOrStdin(), files, "delete")
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), err)
		fmt.Fprintf(cmd.ErrOrStderr(), "fleetd delete: nothing was deleted\n")
		return &exitError{code: 1}
	}
	c, err := flags.client()
	if err != nil {
		return err
	}
	failed := false
	for _, m := range members {
		var res mcp.WriteResult
		err := c.delete(cmd.Context(), "/members/"+url.PathEscape(m.Name), &res)
		var he *httpError
		switch {
		case err == nil:
			fmt.Fprintf(cmd.OutOrStdout(), "member/%s deleted\n", m.Name)
		case errors.As(err, &he) && he.status == http.StatusNotFound:
			if !ignoreNotFound {
				fmt.Fprintf(cmd.ErrOrStderr(), "fleetd delete: member %q not found\n", m.Name)
				failed = true
			}
		default:
			fmt.Fprintf(cmd.ErrOrStderr(), "fleetd delete: member/%s: %s\n", m.Name, describeHTTPError(err))
			failed = true
		}
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}
