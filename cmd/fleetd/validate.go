package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// validateOptions are `fleetd validate PATH...`'s.
type validateOptions struct {
	ioStreams
	paths    []string // directories and files
	maxBytes int64
}

func newValidateCmd() *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate DIR|FILE...",
		Short: "Check manifests (a directory, or files); print every problem as FILE:LINE: field: message",
		Long: `Validate decodes manifests the way fleetd serve reads them: every manifest
file directly in each DIR (*.yaml, *.yml; not dotfiles, editor backups or
subdirectories), and each FILE named. Like the watcher, it reads only regular
files (and symbolic links to them) of at most --max-manifest-bytes; a
directory, named pipe, device or oversized file named like a manifest in DIR
is a problem.

Everything given is checked as one set, as if it were one manifests
directory: no kind and name defined twice, every Member's profile and tenant
defined, no branch of a repository claimed by two Members. Given only
directories, a reference the set does not resolve is a problem, as fleetd
serve of that directory would hold the member at Ready=False; given a FILE,
it is printed as a note instead (the file may be meant for a directory that
has the Profile), without changing the exit code.

It prints every problem on its own line as FILE:LINE: field: message and
exits 1, or prints a one-line summary and exits 0. Usage errors exit 2.`,
		Example: `  fleetd validate manifests/
  fleetd validate manifests/reviewer.yaml
  fleetd validate manifests/ new-member.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: runVerb(o),
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
	o.paths = args
	return nil
}

func (o *validateOptions) Validate() error { return nil }

// Run prints the problems on the output, one per line, then a count on the
// error stream; or the notes on the error stream and the summary on the
// output.
func (o *validateOptions) Run(context.Context) error {
	r, onlyDirs, err := o.read()
	if err != nil {
		fmt.Fprintf(o.errOut, "fleetd validate: %v\n", err)
		return &exitError{code: 1}
	}
	where := strings.Join(o.paths, ", ")
	refs := unresolvedReferences(r, where)
	errs := append(r.Errors(), decode.CheckWorktrees(r.Files, profilesOf(r))...)
	if onlyDirs {
		errs = append(errs, refs...)
	}
	errs.Sort()
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(o.out, e)
		}
		fmt.Fprintf(o.errOut, "fleetd validate: %s in %s\n", plural(len(errs), "problem"), where)
		return &exitError{code: 1}
	}
	refs.Sort()
	for _, e := range refs {
		fmt.Fprintf(o.errOut, "fleetd validate: note: %v\n", e)
	}
	fmt.Fprintln(o.out, summary(where, r.Objects()))
	return nil
}

// read decodes every path as one set: a directory's manifest files as the
// watcher lists them (decode.Dir), a file as named. onlyDirs says that no
// file was named. A path that cannot be read is an error; a named file
// that cannot or may not be read (a directory listed with a file's name
// is read as a directory) is a problem of the set.
func (o *validateOptions) read() (r *decode.DirResult, onlyDirs bool, err error) {
	r, onlyDirs = &decode.DirResult{}, true
	seen := map[string]bool{} // a file named and in a directory named is read once
	add := func(f decode.FileResult) {
		if p := filepath.Clean(f.Path); !seen[p] {
			seen[p] = true
			r.Files = append(r.Files, f)
		}
	}
	for _, path := range o.paths {
		st, err := os.Stat(path)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, errors.Unwrap(err))
		}
		if st.IsDir() {
			d, err := decode.Dir(path, &decode.DirOptions{MaxFileBytes: o.maxBytes})
			if err != nil {
				return nil, false, err
			}
			for _, f := range d.Files {
				add(f)
			}
			continue
		}
		onlyDirs = false
		if seen[filepath.Clean(path)] {
			continue
		}
		data, err := decode.ReadManifest(path, o.maxBytes)
		if err != nil {
			add(decode.FileResult{Path: path, Errors: decode.ErrorList{decode.AsError(path, err)}})
			continue
		}
		add(decode.Manifest(path, data))
	}
	if len(o.paths) == 1 {
		r.Dir = o.paths[0]
	}
	return r, onlyDirs, nil
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
// Profile, or whose spec.mcpTarget.tenantId names no Tenant, among the
// objects decoded from r (where names them), at the lines the decoder
// recorded. fleetd serve would hold such a member at Ready=False
// (ProfileNotFound, TenantNotFound) and its store reports the same error;
// validate says so before it runs. An object defined twice still counts as
// defined: the duplicate is reported on its own.
func unresolvedReferences(r *decode.DirResult, where string) decode.ErrorList {
	defined := map[string]bool{}
	for _, f := range r.Files {
		for _, o := range f.Objects {
			defined[o.GetObjectKind()+"/"+o.GetName()] = true
		}
	}
	return decode.CheckReferences(r.Files, func(kind, name string) bool { return defined[kind+"/"+name] }, where)
}

// profilesOf returns r's Profile of a name, for decode.CheckWorktrees: a
// branch two Members claim is reported wherever their profiles are.
func profilesOf(r *decode.DirResult) func(name string) *v1alpha1.Profile {
	profiles := map[string]*v1alpha1.Profile{}
	for _, o := range r.Objects() {
		if p, ok := o.(*v1alpha1.Profile); ok {
			profiles[p.Name] = p
		}
	}
	return func(name string) *v1alpha1.Profile { return profiles[name] }
}
