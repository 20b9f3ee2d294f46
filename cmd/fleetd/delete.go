package main

import (
	"cmp"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// deleteOptions are `fleetd delete member NAME` and `fleetd delete -f`'s.
type deleteOptions struct {
	ioStreams
	serverOptions
	files          []string
	ignoreNotFound bool
	now            bool
	args           []string
}

func newDeleteCmd() *cobra.Command {
	o := &deleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete member NAME... | delete -f FILE|DIR|-",
		Short: "Delete a Member from a running fleetd (its tab closes once its agent is idle), or what manifest files define",
		Long: `delete removes the Member's manifest from the directory fleetd serve watches
(DELETE /members/NAME); fleetd then closes its tab and revokes its token.
NAME may also be the member's pane id, terminal id or session id; several
names delete each in turn, and a name fleetd does not have is reported while
the others are still deleted (exit status 1).

A member whose agent is busy — in the middle of a turn, with a message
queued for it or a question open — takes no new message and keeps its tab
until the agent is idle, at the latest until its grace period ends
(spec.terminationGracePeriod, 10m unless its profile says otherwise); it is
Terminating meanwhile, and a reply it sends still reaches the primary.
--now closes the tab at once, whatever the agent is doing (its turn is
lost); it also forces a member deleted before whose tab is still open.

With -f, it deletes every Member, Profile and Tenant the files define (read
as apply reads them: files, directories, - for standard input, Lists), the
Members first: fleetd refuses to delete a Profile or Tenant that a Member
still references, and says which. An object fleetd does not have is
reported, the others are still deleted, and the exit status is 1 (0 with
--ignore-not-found).`,
		Example: `  fleetd delete member reviewer
  fleetd delete member reviewer builder
  fleetd delete member reviewer --now
  fleetd delete -f reviewer.yaml
  fleetd delete -f manifests/`,
		Args:              cobra.ArbitraryArgs, // Validate checks them
		ValidArgsFunction: completeResourceNamesOf(&o.serverOptions, memberResource),
		RunE:              runVerb(o),
	}
	cmd.Flags().StringArrayVarP(&o.files, "filename", "f", nil, "delete the Members, Profiles and Tenants these manifest files or directories define (repeatable; - for standard input)")
	cmd.Flags().BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "with -f, an object fleetd does not have is not an error")
	cmd.Flags().BoolVar(&o.now, "now", false, "close the tab at once, even if the agent is in the middle of a turn (also forces a member already Terminating)")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *deleteOptions) Complete(cmd *cobra.Command, args []string) error {
	o.serverOptions.complete(cmd)
	o.args = args
	return nil
}

func (o *deleteOptions) Validate() error {
	switch {
	case len(o.files) > 0 && len(o.args) > 0:
		return fmt.Errorf("-f takes no resource or name arguments, got %d", len(o.args))
	case len(o.files) > 0:
		return nil
	case len(o.args) < 2:
		return fmt.Errorf("want a resource type and a name, got %d arguments", len(o.args))
	case !memberResource.is(o.args[0]):
		return fmt.Errorf("unknown resource type %q; fleetd deletes: member", o.args[0])
	}
	return nil
}

func (o *deleteOptions) Run(ctx context.Context) error {
	if len(o.files) > 0 {
		return o.deleteFiles(ctx)
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	failed := false
	for _, ref := range o.args[1:] {
		m, err := c.DeleteMember(ctx, ref, o.now)
		if err != nil {
			o.deleteFailed(ref, err)
			failed = true
			continue
		}
		o.deleted(cmp.Or(m.Name, ref), m)
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}

// deleted says that member name was deleted, and, when its agent was busy
// and --now was not given, that its tab closes only once it is idle.
func (o *deleteOptions) deleted(name string, m mcp.MemberView) {
	note := ""
	if busy := m.AgentStatus == "working" || m.AgentStatus == "blocked"; busy && !o.now {
		note = fmt.Sprintf(" (its agent is %s: the tab closes once it is idle; --now closes it at once)", m.AgentStatus)
	}
	fmt.Fprintf(o.out, "member/%s deleted%s\n", termtext.Line(name), note)
}

// deleteFailed says why member ref was not deleted.
func (o *deleteOptions) deleteFailed(ref string, err error) {
	o.objectDeleteFailed(&v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: ref}}, err) // deletefile.go
}
