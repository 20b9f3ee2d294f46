package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// What a command tells its user to run next names fleetd's own commands
// (never an MCP tool), with --server and --state-dir when they are not the
// defaults, so that the hint reaches the same fleetd as the command that
// printed it.

// command is fleetd with args and the flags that reach o's fleetd.
func (o *serverOptions) command(args ...string) string {
	return clientLine("fleetd", o.server, o.stateDir, args...)
}

// clientLine is the command line of a client command: name with args, and
// --server and --state-dir when server and stateDir are not the defaults.
func clientLine(name, server, stateDir string, args ...string) string {
	if server != client.DefaultServer {
		args = append(args, "--server", server)
	}
	if stateDir != defaultStateDir() {
		args = append(args, "--state-dir", stateDir)
	}
	return shellLine(name, args)
}

// noMember says that ref names no member of o's fleetd — where to list
// them, and, when a manifest with errors declares a member by that name
// (a new file with a typo defines nothing), that file and its problems —
// and makes the process exit 1.
func (s *ioStreams) noMember(ctx context.Context, o *serverOptions, c *client.Client, verb, ref string) error {
	fmt.Fprintf(s.errOut, "fleetd %s: no member with name, pane id, terminal id or session id %s; `%s` lists them\n",
		verb, termtext.Line(fmt.Sprintf("%q", ref)), o.command("get", "members"))
	list, err := c.ManifestErrors(ctx)
	if err != nil {
		return &exitError{code: 1} // an older fleetd, or a worker's token: nothing more to say
	}
	for _, file := range brokenDefinitions(list, "Member", ref) {
		errs := fileErrors(list, file)
		fmt.Fprintf(s.errOut, "%s declares member %s but has %s, so fleetd has not created it; once the file is fixed fleetd reads it again:\n",
			termtext.Line(file), termtext.Line(ref), plural(len(errs), "error"))
		for _, e := range errs {
			fmt.Fprintln(s.errOut, "  "+termtext.Line(e.Error()))
		}
	}
	return &exitError{code: 1}
}

// brokenDefinitions are the files with errors that declare the object
// kind/name: a failing document that spells that kind and name, or, when
// the file's errors cannot tell (a syntax error), a file named after it
// (name.yaml, as `fleetd apply` names a member's).
func brokenDefinitions(list mcp.ManifestErrorList, kind, name string) []string {
	var files []string
	add := func(f string) {
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	for _, e := range list.Items {
		switch {
		case e.Object != nil && e.Object.Kind == kind && e.Object.Name == name:
			add(e.File)
		case e.Object == nil || e.Object.Name == "":
			if base := filepath.Base(e.File); strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml") == name {
				add(e.File)
			}
		}
	}
	return files
}

// fileErrors are the errors of one file, as `fleetd validate` prints them.
func fileErrors(list mcp.ManifestErrorList, file string) decode.ErrorList {
	var out decode.ErrorList
	for _, e := range list.Items {
		if e.File == file {
			out = append(out, &decode.Error{File: e.File, Line: e.Line, Field: e.Field, Msg: e.Message})
		}
	}
	return out
}

// noteManifestErrors ends a listing with how many manifests have errors
// and how to see them, on the error stream (the listing on the output
// stays what -o asked for): a typo in a new manifest defines nothing, and
// would otherwise show only in fleetd's log. Nothing when there are none,
// or fleetd does not say (an older fleetd, a worker's token).
func (s *ioStreams) noteManifestErrors(ctx context.Context, c *client.Client) {
	list, err := c.ManifestErrors(ctx)
	if err != nil || len(list.Items) == 0 {
		return
	}
	var files []string
	for _, e := range list.Items {
		if !slices.Contains(files, e.File) {
			files = append(files, e.File)
		}
	}
	if list.Directory != "" {
		n := plural(len(files), "manifest")
		fmt.Fprintf(s.errOut, "%s %s errors: run `%s`\n", n, hasHave(len(files)), shellLine("fleetd", []string{"validate", list.Directory}))
		return
	}
	shown := files[:min(len(files), 3)]
	more := ""
	if len(files) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(files)-len(shown))
	}
	fmt.Fprintf(s.errOut, "%s %s errors: %s%s\n", plural(len(files), "definition"), hasHave(len(files)), termtext.Line(strings.Join(shown, ", ")), more)
}

func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}
