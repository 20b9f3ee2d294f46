package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/cli/labels"
	"github.com/fleetd-dev/fleetd/internal/cli/printers"
)

// getOptions are `fleetd get KIND [NAME]`'s.
type getOptions struct {
	ioStreams
	serverOptions
	outputOptions
	selector    string
	sortBy      string
	watch       bool
	watchEvents bool

	kind     string // the first argument
	name     string // the second, or ""
	resource resource
	sel      labels.Selector
}

func newGetCmd() *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get members|profiles|tenants|nodes [NAME]",
		Short: "List members, profiles or tenants from a running fleetd; watch members change",
		Long: `get lists the members (with their status), profiles or tenants of the running
fleetd, or shows one by NAME. A member's NAME may also be its pane id,
terminal id or session id. -w (members only) keeps going: after the list it
prints one line per change, streamed by fleetd as it happens.`,
		Example: `  fleetd get members
  fleetd get members -o wide
  fleetd get members reviewer -o yaml
  fleetd get members -l 'team=support,tier in (a,b)' --sort-by .status.restarts
  fleetd get members -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}'
  fleetd get members -w
  fleetd get profiles -o name`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeResourceNames(&o.serverOptions),
		RunE:              runVerb(o),
	}
	o.serverOptions.addFlags(cmd)
	o.outputOptions.addFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.selector, "selector", "l", "", "label selector: k=v, k!=v, 'k in (a,b)', 'k notin (a,b)', k, !k; a comma means and")
	f.StringVar(&o.sortBy, "sort-by", "", "sort the list by a JSONPath field, e.g. .metadata.creationTimestamp or .status.restarts")
	f.BoolVarP(&o.watch, "watch", "w", false, "members only: after the list, print one line per change until fleetd stops or you press Ctrl-C")
	f.BoolVar(&o.watchEvents, "output-watch-events", false, "with --watch, print each line's event (ADDED, MODIFIED, DELETED) first")
	return cmd
}

func (o *getOptions) Complete(cmd *cobra.Command, args []string) error {
	o.serverOptions.complete(cmd)
	o.kind = args[0]
	if len(args) == 2 {
		o.name = args[1]
	}
	return nil
}

func (o *getOptions) Validate() error {
	r, ok := lookupResource(o.kind)
	if !ok {
		return fmt.Errorf("unknown resource type %q; fleetd serves: %s", o.kind, resourceNames)
	}
	o.resource = r
	if err := o.outputOptions.validate(); err != nil {
		return err
	}
	sel, err := labels.Parse(o.selector)
	if err != nil {
		return fmt.Errorf("-l: %w", err)
	}
	o.sel = sel
	if err := printers.CheckSortBy(o.sortBy); err != nil {
		return err
	}
	switch {
	case o.name != "" && o.selector != "":
		return fmt.Errorf("a name and -l cannot be combined: the name picks one %s", r.kind)
	case o.watchEvents && !o.watch:
		return fmt.Errorf("--output-watch-events needs --watch")
	case o.watch && r.kind != v1alpha1.KindMember:
		return fmt.Errorf("only members can be watched; %s change only when their manifests do", r.plural)
	}
	return nil
}

func (o *getOptions) Run(ctx context.Context) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	if o.watch {
		return o.runWatch(ctx, c)
	}
	objs, err := o.resource.fetch(ctx, c, o.name)
	if err != nil {
		return err
	}
	p := o.resource.printer(o.format)
	p.Now = time.Now()
	if o.name != "" {
		return p.PrintOne(o.out, objs[0])
	}
	kept := objs[:0]
	for _, obj := range objs {
		if o.sel.Matches(obj.GetMeta().Labels) {
			kept = append(kept, obj)
		}
	}
	if err := printers.SortBy(kept, o.sortBy); err != nil {
		return err
	}
	return p.PrintList(o.out, kept)
}

// runWatch is get -w: the members, then their changes, until fleetd ends
// the stream (an error) or ctx ends (nil). Nothing polls.
func (o *getOptions) runWatch(ctx context.Context, c *client.Client) error {
	name := o.name
	if name != "" {
		// The stream names members by name: resolve a pane, terminal or
		// session id first.
		m, err := c.Member(ctx, name)
		if err != nil {
			return err
		}
		name = m.Name
	}
	stream := printers.NewMemberStream(o.out, o.format, o.watchEvents, time.Now)
	match := func(m *v1alpha1.Member) bool { return (name == "" || m.Name == name) && o.sel.Matches(m.Labels) }
	return c.WatchMembers(ctx, match, client.WatchHandler{
		Synced: func(members []v1alpha1.Member) error {
			if err := printers.SortBy(members, o.sortBy); err != nil {
				return err
			}
			return stream.Initial(members)
		},
		Changed: stream.Change,
	})
}
