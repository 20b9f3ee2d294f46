package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Shell completion of names: `fleetd get members <TAB>`, `fleetd describe
// profile <TAB>`, `fleetd send <TAB>` and `fleetd delete member <TAB>`
// complete from the running fleetd, asked with the command's own --server
// and --state-dir (or $FLEETD_SERVER, $FLEETD_TOKEN) like the command
// itself. When fleetd is not running, or does not answer within
// completionTimeout, there are no completions and nothing is printed: a
// shell's completion must never print errors into the command line.

// completionTimeout bounds one completion's call to fleetd.
const completionTimeout = 2 * time.Second

// completeResourceNames completes `get` and `describe`: the resource types
// first, then the names of the chosen one.
func completeResourceNames(o *serverOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			var out []cobra.Completion
			for _, r := range resources {
				if strings.HasPrefix(r.plural, toComplete) {
					out = append(out, r.plural)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		case 1:
			r, ok := lookupResource(args[0])
			if !ok {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return fleetNames(cmd, o, r, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeMemberArg completes a member name as the argument at position
// pos (send: 0; delete member: 1; logs: 0).
func completeMemberArg(o *serverOptions, pos int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) != pos {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return fleetNames(cmd, o, memberResource, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// fleetNames lists the names of r's objects that start with prefix, or
// nothing when fleetd cannot be asked. cmd's flags say which fleetd.
func fleetNames(cmd *cobra.Command, o *serverOptions, r resource, prefix string) []cobra.Completion {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	o.complete(cmd)
	c, err := o.client()
	if err != nil {
		return nil
	}
	c = c.WithTimeout(completionTimeout)
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	objs, err := r.fetch(ctx, c, "")
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, o := range objs {
		name := o.GetName()
		// A name a shell would mangle is left out rather than completed
		// wrongly (member names are [a-z0-9_-]; profiles' and tenants'
		// are checked as loosely as the manifests allow).
		if strings.HasPrefix(name, prefix) && !strings.ContainsAny(name, " \t\n\"'\\$`;&|<>()*?[]{}!#~") {
			out = append(out, name)
		}
	}
	return out
}

// completeResourceNamesOf completes `delete`: the one resource type it
// takes, then that type's names.
func completeResourceNamesOf(o *serverOptions, r resource) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			if singular := strings.ToLower(r.kind); strings.HasPrefix(singular, toComplete) {
				return []cobra.Completion{singular}, cobra.ShellCompDirectiveNoFileComp
			}
		case 1:
			if got, ok := lookupResource(args[0]); ok && got.kind == r.kind {
				return fleetNames(cmd, o, r, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}
