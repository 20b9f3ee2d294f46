package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/encode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/cli/manifests"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// diffOptions are `fleetd diff -f`'s.
type diffOptions struct {
	ioStreams
	serverOptions
	files []string
}

func newDiffCmd() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR|-",
		Short: "Show how the Members, Profiles and Tenants in manifest files differ from the running fleetd's",
		Long: `diff reads the files as apply does (files, directories, - for standard input,
Lists) and prints, for each Member, Profile and Tenant whose definition
differs from the live one, a unified diff from the live definition to the
desired one (live/KIND/NAME to desired/KIND/NAME, in apply's order). Both
sides are written the same way: what you write in a manifest —
metadata.name, labels, annotations and spec — without status, without the
metadata fleetd owns and without defaults, so a diff shows only what
applying would change. An object fleetd does not have shows as all new
lines.

Exit status, as kubectl diff and diff(1): 0 when nothing differs, 1 when
something does, 2 (or more) when diff itself failed — invalid input, or
fleetd unreachable.`,
		Example: `  fleetd diff -f reviewer.yaml
  fleetd diff -f manifests/ && echo "nothing to apply"`,
		Args: cobra.NoArgs,
		RunE: runVerb(o),
	}
	cmd.Flags().StringArrayVarP(&o.files, "filename", "f", nil, "manifest file, directory of manifest files, or - for standard input (repeatable)")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *diffOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.serverOptions.complete(cmd)
	return nil
}

func (o *diffOptions) Validate() error {
	if len(o.files) == 0 {
		return fmt.Errorf("-f FILE is required (use -f - for standard input)")
	}
	return nil
}

func (o *diffOptions) Run(ctx context.Context) error {
	objs, err := manifests.Read(o.in, o.files, "diff")
	if err != nil {
		fmt.Fprintln(o.errOut, err)
		return &exitError{code: 2}
	}
	c, err := o.client()
	if err != nil {
		fmt.Fprintf(o.errOut, "fleetd diff: %v\n", err)
		return &exitError{code: 2}
	}
	differs, failed := false, false
	for _, obj := range manifests.ForApply(objs) {
		text, err := diffObject(ctx, c, obj)
		if err != nil {
			fmt.Fprintf(o.errOut, "fleetd diff: %s: %s\n", kindName(obj), client.ErrorText(err))
			failed = true
			continue
		}
		if text != "" {
			differs = true
			fmt.Fprint(o.out, text)
		}
	}
	switch {
	case failed:
		return &exitError{code: 2}
	case differs:
		return &exitError{code: 1}
	}
	return nil
}

// diffObject returns the unified diff from the live definition of obj to
// obj, or "" when they are the same definition.
func diffObject(ctx context.Context, c *client.Client, obj v1alpha1.Object) (string, error) {
	want, err := definitionText(obj)
	if err != nil {
		return "", err
	}
	live, found, err := c.Live(ctx, obj.GetObjectKind(), obj.GetName())
	if err != nil {
		return "", err
	}
	got := ""
	if found {
		if got, err = definitionText(live); err != nil {
			return "", err
		}
	}
	if got == want {
		return "", nil
	}
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        lines(got),
		B:        lines(want),
		FromFile: "live/" + kindName(obj),
		ToFile:   "desired/" + kindName(obj),
		Context:  3,
	})
}

// lines splits text after each newline (difflib.SplitLines would add an
// empty last line).
func lines(text string) []string {
	l := strings.SplitAfter(text, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

// definitionText is an object as a manifest would say it (api/encode's
// Minimal: no status, no fleetd-owned metadata, no defaults), safe to print
// on a terminal: a value someone else wrote cannot smuggle in an escape
// sequence (package termtext).
func definitionText(obj v1alpha1.Object) (string, error) {
	n, err := encode.Minimal(obj, nil)
	if err != nil {
		return "", err
	}
	b, err := encode.Marshal(n)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(termtext.Text(string(b)), "\n") + "\n", nil
}
