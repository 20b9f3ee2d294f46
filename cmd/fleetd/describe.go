package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/cli/printers"
)

// describeOptions are `fleetd describe KIND NAME`'s.
type describeOptions struct {
	ioStreams
	serverOptions
	kind, name string // the arguments; name is "" when only one was given
	resource   resource
	usage      string // the usage line, for notAKind
}

func newDescribeCmd() *cobra.Command {
	o := &describeOptions{}
	cmd := &cobra.Command{
		Use:   "describe member|profile|tenant|node NAME",
		Short: "Show a member's spec, status, conditions and recent events, or a profile, tenant or node",
		Long: `describe shows one object of the running fleetd in full. A member's NAME may
also be its pane id, terminal id or session id. A member that is not there
because the manifest that declares it has errors is named with that file and
its errors.`,
		Example: `  fleetd describe member reviewer
  fleetd describe member w1:p2
  fleetd describe profile claude
  fleetd describe node buildbox`,
		Args:              describeArgs,
		ValidArgsFunction: completeResourceNames(&o.serverOptions),
		RunE:              runVerb(o),
	}
	o.serverOptions.addFlags(cmd)
	return cmd
}

// describeArgs takes KIND NAME, and KIND alone too: Validate and Run say
// what one argument lacks (`describe reviewer` names no kind). More than
// two read "want 2 arguments", as cobra.ExactArgs(2) would.
func describeArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 2 {
		return cobra.ExactArgs(2)(cmd, args)
	}
	return cobra.MinimumNArgs(1)(cmd, args)
}

func (o *describeOptions) Complete(cmd *cobra.Command, args []string) error {
	o.serverOptions.complete(cmd)
	o.usage = "Usage: " + cmd.UseLine()
	o.kind = args[0]
	if len(args) == 2 {
		o.name = args[1]
	}
	return nil
}

// describeKinds is what describe's unknown-kind errors list.
const describeKinds = "member, profile, tenant or node"

func (o *describeOptions) Validate() error {
	r, ok := lookupResource(o.kind)
	switch {
	case ok && o.name == "":
		return errors.New("missing NAME")
	case !ok && o.name != "":
		return fmt.Errorf("unknown resource type %q; fleetd serves: %s", o.kind, describeKinds)
	}
	o.resource = r // the zero resource for `describe WORD`: Run tells what WORD names
	return nil
}

func (o *describeOptions) Run(ctx context.Context) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	if o.name == "" {
		return o.notAKind(ctx, &o.serverOptions, c, "describe", o.kind,
			fmt.Sprintf("missing the resource type: %q is not one of %s", o.kind, describeKinds), o.usage)
	}
	now := time.Now()
	if o.resource.kind != v1alpha1.KindMember {
		objs, err := o.resource.fetch(ctx, c, o.name)
		if err != nil {
			return err
		}
		switch obj := objs[0].(type) {
		case *v1alpha1.Profile:
			r, err := c.Rollout(ctx, v1alpha1.KindProfile, obj.Name)
			if err != nil {
				return err
			}
			return printers.DescribeProfile(o.out, obj, &r, now)
		case *v1alpha1.Tenant:
			return printers.DescribeTenant(o.out, obj, now)
		case *v1alpha1.Node:
			return printers.DescribeNode(o.out, obj, now)
		}
	}
	m, err := c.Member(ctx, o.name)
	var nm *client.NoMemberError
	if errors.As(err, &nm) {
		return o.noMember(ctx, &o.serverOptions, c, "describe", o.name)
	}
	if err != nil {
		return err
	}
	events, err := c.MemberEvents(ctx, m.Name)
	if err != nil {
		return err
	}
	return printers.DescribeMember(o.out, &m, events, now)
}
