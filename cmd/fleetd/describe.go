package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/printers"
)

// describeOptions are `fleetd describe KIND NAME`'s.
type describeOptions struct {
	ioStreams
	serverOptions
	kind, name string // the arguments
	resource   resource
}

func newDescribeCmd() *cobra.Command {
	o := &describeOptions{}
	cmd := &cobra.Command{
		Use:   "describe member|profile|tenant|node NAME",
		Short: "Show a member's spec, status, conditions and recent events, or a profile or tenant",
		Long: `describe shows one object of the running fleetd in full. A member's NAME may
also be its pane id, terminal id or session id.`,
		Example: `  fleetd describe member reviewer
  fleetd describe member w1:p2
  fleetd describe profile claude`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeResourceNames(&o.serverOptions),
		RunE:              runVerb(o),
	}
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *describeOptions) Complete(cmd *cobra.Command, args []string) error {
	o.serverOptions.complete(cmd)
	o.kind, o.name = args[0], args[1]
	return nil
}

func (o *describeOptions) Validate() error {
	r, ok := lookupResource(o.kind)
	if !ok {
		return fmt.Errorf("unknown resource type %q; fleetd serves: member, profile, tenant or node", o.kind)
	}
	o.resource = r
	return nil
}

func (o *describeOptions) Run(ctx context.Context) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	now := time.Now()
	if o.resource.kind != v1alpha1.KindMember {
		objs, err := o.resource.fetch(ctx, c, o.name)
		if err != nil {
			return err
		}
		switch obj := objs[0].(type) {
		case *v1alpha1.Profile:
			return printers.DescribeProfile(o.out, obj, now)
		case *v1alpha1.Tenant:
			return printers.DescribeTenant(o.out, obj, now)
		case *v1alpha1.Node:
			return printers.DescribeNode(o.out, obj, now)
		}
	}
	m, err := c.Member(ctx, o.name)
	if err != nil {
		return err
	}
	events, err := c.MemberEvents(ctx, m.Name)
	if err != nil {
		return err
	}
	return printers.DescribeMember(o.out, &m, events, now)
}
