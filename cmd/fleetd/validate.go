package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// validateOptions are `fleetd validate DIR`'s.
type validateOptions struct {
	ioStreams
	dir      string
	maxBytes int64
}

func newValidateCmd() *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate DIR",
		Short: "Check a manifests directory; print every problem as FILE:LINE: field: message",
		Long: `Validate decodes every manifest file directly in DIR (*.yaml, *.yml; not
dotfiles, editor backups or subdirectories) the way fleetd serve reads them,
and checks that every Member's profile and tenant name an object in DIR.
Like the watcher, it reads only regular files (and symbolic links to them)
of at most --max-manifest-bytes; a directory, named pipe, device or
oversized file named like a manifest is a problem.

It prints every problem on its own line as FILE:LINE: field: message and
exits 1, or prints a one-line summary and exits 0. Usage errors exit 2.`,
		Example: `  fleetd validate manifests/`,
		Args:    requireDirArg,
		RunE:    runVerb(o),
	}
	addMaxManifestBytesFlag(cmd, &o.maxBytes)
	return cmd
}

// addMaxManifestBytesFlag adds --max-manifest-bytes, the one spelling of
// the limit serve and validate share.
func addMaxManifestBytesFlag(cmd *cobra.Command, v *int64) {
	*v = decode.DefaultMaxManifestBytes
	cmd.Flags().Var((*sizeFlag)(v), "max-manifest-bytes", "size limit on one manifest file; a larger file is skipped with an error")
}

func (o *validateOptions) Complete(_ *cobra.Command, args []string) error {
	o.dir = args[0]
	return nil
}

func (o *validateOptions) Validate() error { return nil }

// Run prints the problems on the output, one per line, then a count on the
// error stream; or the summary on the output.
func (o *validateOptions) Run(context.Context) error {
	r, err := decode.Dir(o.dir, &decode.DirOptions{MaxFileBytes: o.maxBytes})
	if err != nil {
		fmt.Fprintf(o.errOut, "fleetd validate: %v\n", err)
		return &exitError{code: 1}
	}
	errs := append(r.Errors(), unresolvedReferences(r)...)
	errs.Sort()
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(o.out, e)
		}
		fmt.Fprintf(o.errOut, "fleetd validate: %s in %s\n", plural(len(errs), "problem"), o.dir)
		return &exitError{code: 1}
	}
	fmt.Fprintln(o.out, summary(o.dir, r.Objects()))
	return nil
}

// summary is the line printed for a valid directory, such as
// "manifests/: 7 objects valid (4 Members, 2 Profiles, 1 Tenant)".
func summary(dir string, objs []v1alpha1.Object) string {
	if len(objs) == 0 {
		return dir + ": no objects (no manifest files, or only empty documents)"
	}
	count := map[string]int{}
	for _, o := range objs {
		count[o.GetObjectKind()]++
	}
	var parts []string
	for _, kind := range []string{v1alpha1.KindMember, v1alpha1.KindProfile, v1alpha1.KindTenant} {
		if n := count[kind]; n > 0 {
			parts = append(parts, plural(n, kind))
		}
	}
	return fmt.Sprintf("%s: %s valid (%s)", dir, plural(len(objs), "object"), strings.Join(parts, ", "))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// unresolvedReferences reports every Member whose spec.profile names no
// Profile, whose spec.mcpTarget.tenantId names no Tenant, or whose worktree
// branch another Member claims, among the objects decoded from the
// directory, at the lines the decoder recorded.
// fleetd serve would hold such a member at Ready=False (ProfileNotFound,
// TenantNotFound) and its store reports the same error; validate says so
// before it runs. An object defined twice still counts as defined: the
// duplicate is reported on its own.
func unresolvedReferences(r *decode.DirResult) decode.ErrorList {
	defined := map[string]bool{}
	for _, f := range r.Files {
		for _, o := range f.Objects {
			defined[o.GetObjectKind()+"/"+o.GetName()] = true
		}
	}
	profiles := map[string]*v1alpha1.Profile{}
	for _, o := range r.Objects() {
		if p, ok := o.(*v1alpha1.Profile); ok {
			profiles[p.Name] = p
		}
	}
	return append(decode.CheckReferences(r.Files, func(kind, name string) bool { return defined[kind+"/"+name] }, r.Dir),
		decode.CheckWorktrees(r.Files, func(name string) *v1alpha1.Profile { return profiles[name] })...)
}
