package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

func newApplyCmd() *cobra.Command {
	var flags clientFlags
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update Members in a running fleetd from a manifest file",
		Long: `apply reads FILE (or standard input with -f -), decodes every document the
way fleetd serve reads manifests, and sends each Member to the running fleetd
(POST /members), which writes it into its manifests directory. It prints one
line per Member: member/NAME created, configured or unchanged.

Nothing is sent unless the whole file is valid: problems are printed as
FILE:LINE: field: message. Only Members can be applied; Profiles and Tenants
are the operator's files and are edited in the manifests directory itself.`,
		Example: `  fleetd apply -f reviewer.yaml
  fleetd get members reviewer -o yaml | fleetd apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErrorf(cmd, "-f FILE is required (use -f - for standard input)")
			}
			members, err := readMembers(cmd.InOrStdin(), file)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), err)
				fmt.Fprintf(cmd.ErrOrStderr(), "fleetd apply: nothing was applied\n")
				return &exitError{code: 1}
			}
			c, err := flags.client()
			if err != nil {
				return err
			}
			failed := false
			for _, m := range members {
				var res mcp.WriteResult
				status, err := c.post(cmd.Context(), "/members", m, &res)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "fleetd apply: member/%s: %s\n", m.Name, describeHTTPError(err))
					failed = true
					continue
				}
				result := res.Result
				if result == "" && status == http.StatusCreated {
					result = "created"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "member/%s %s\n", m.Name, termtext.Line(result))
			}
			if failed {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "manifest file with one or more Members, or - for standard input")
	flags.register(cmd)
	return cmd
}

// readMembers reads and strictly decodes file ("-": stdin). It returns
// every problem, located by FILE:LINE, or the Members in file order. A
// file that holds anything but Members, or nothing, is an error.
func readMembers(stdin io.Reader, file string) ([]*v1alpha1.Member, error) {
	name := file
	var data []byte
	var err error
	if file == "-" {
		name = "<stdin>"
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("fleetd apply: %w", err)
	}
	objs, errs := decode.File(name, data)
	if len(errs) > 0 {
		return nil, errs
	}
	var members []*v1alpha1.Member
	var problems []error
	for _, o := range objs {
		m, ok := o.(*v1alpha1.Member)
		if !ok {
			problems = append(problems, fmt.Errorf("%s: %s %q: fleetd apply takes only Members; %ss are the operator's: edit them in the manifests directory fleetd serve watches (--manifests)",
				name, o.GetObjectKind(), o.GetName(), o.GetObjectKind()))
			continue
		}
		m.APIVersion, m.Kind = v1alpha1.GroupVersion, v1alpha1.KindMember
		members = append(members, m)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("%s: no Members to apply", name)
	}
	return members, nil
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
