package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	forObject   string // --for TYPE/NAME (events)

	kind     string // the first argument
	name     string // the second, or ""
	resource resource
	events   bool   // get events
	forName  string // the member --for names
	sel      labels.Selector
	usage    string // the usage line, for notAKind
}

func newGetCmd() *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get members|profiles|tenants|nodes|events [NAME]",
		Short: "List members, profiles, tenants, nodes or events from a running fleetd; watch members change",
		Long: `get lists the members (with their status), profiles, tenants or nodes of the
running fleetd, or shows one by NAME. A member's NAME may also be its pane
id, terminal id or session id. -w (members only) keeps going: after the list
it prints one line per change, streamed by fleetd as it happens.

get events lists the recent events of every member, oldest first (--for
member/NAME: of one); -w then prints each new one as it happens.

When manifests fleetd watches have errors (a new member's file with a typo
defines nothing until it is fixed), a list ends with a line on the error
stream that says how many and how to see them.`,
		Example: `  fleetd get members
  fleetd get members -o wide
  fleetd get members reviewer -o yaml
  fleetd get members -l 'team=support,tier in (a,b)' --sort-by .status.restarts
  fleetd get members -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}'
  fleetd get members -w
  fleetd get profiles -o name
  fleetd get events --for member/reviewer -w`,
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
	f.StringVar(&o.forObject, "for", "", "events only: the events of one object, member/NAME")
	return cmd
}

func (o *getOptions) Complete(cmd *cobra.Command, args []string) error {
	o.serverOptions.complete(cmd)
	o.usage = "Usage: " + cmd.UseLine()
	o.kind = args[0]
	if len(args) == 2 {
		o.name = args[1]
	}
	return nil
}

func (o *getOptions) Validate() error {
	if isEvents(o.kind) {
		return o.validateEvents()
	}
	if o.forObject != "" {
		return fmt.Errorf("--for picks the events of an object: fleetd get events --for member/NAME")
	}
	r, ok := lookupResource(o.kind)
	if !ok {
		if o.name == "" {
			return nil // Run says what the word names, if anything (notAKind)
		}
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
		return fmt.Errorf("only members and events can be watched; %s change only when their manifests do", r.plural)
	}
	return nil
}

// validateEvents checks the options of get events.
func (o *getOptions) validateEvents() error {
	o.events = true
	if err := o.outputOptions.validate(); err != nil {
		return err
	}
	switch {
	case o.name != "":
		return fmt.Errorf("get events takes no NAME; --for member/NAME picks a member's events")
	case o.selector != "":
		return fmt.Errorf("events have no labels: -l does not apply; --for member/NAME picks a member's events")
	case o.sortBy != "":
		return fmt.Errorf("events are listed oldest first; --sort-by does not apply")
	case o.watchEvents:
		return fmt.Errorf("--output-watch-events is for members; get events -w prints each event as it happens")
	case !slices.Contains([]string{"", "wide", "json", "yaml"}, o.output):
		return fmt.Errorf("get events prints a table, -o json or -o yaml")
	}
	if o.forObject != "" {
		kind, name, ok := strings.Cut(o.forObject, "/")
		if r, known := lookupResource(kind); !ok || !known || r.kind != v1alpha1.KindMember || name == "" {
			return fmt.Errorf("--for %s: want member/NAME (members are what has events)", o.forObject)
		}
		o.forName = name
	}
	return nil
}

// isEvents reports whether kind names events (get events).
func isEvents(kind string) bool { return slices.Contains([]string{"events", "event", "ev"}, kind) }

func (o *getOptions) Run(ctx context.Context) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	switch {
	case o.events:
		return o.runEvents(ctx, c)
	case o.resource.kind == "":
		return o.notAKind(ctx, &o.serverOptions, c, "get", o.kind, fmt.Sprintf("unknown resource type %q; fleetd serves: %s", o.kind, resourceNames), o.usage)
	case o.watch:
		return o.runWatch(ctx, c)
	}
	objs, err := o.resource.fetch(ctx, c, o.name)
	if o.resource.kind == v1alpha1.KindMember && o.name != "" && client.IsNotFound(err) {
		return o.noMember(ctx, &o.serverOptions, c, "get", o.name)
	}
	if err != nil {
		return err
	}
	p := o.resource.printer(o.format)
	p.Now = time.Now()
	if o.name != "" {
		return p.PrintOne(o.out, objs[0])
	}
	if o.resource.kind != v1alpha1.KindNode {
		defer o.noteManifestErrors(ctx, c)
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
		var nm *client.NoMemberError
		if errors.As(err, &nm) {
			return o.noMember(ctx, &o.serverOptions, c, "get", name)
		}
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
			if err := stream.Initial(members); err != nil {
				return err
			}
			if o.name == "" {
				o.noteManifestErrors(ctx, c)
			}
			return nil
		},
		Changed: stream.Change,
	})
}

// runEvents is get events: the members' recent events, then with -w each
// new one, until fleetd ends the stream (an error) or ctx ends (nil).
func (o *getOptions) runEvents(ctx context.Context, c *client.Client) error {
	stream := printers.NewEventStream(o.out, o.format, o.watch, time.Now)
	if !o.watch {
		events, err := c.Events(ctx, o.forName)
		if err != nil {
			return err
		}
		return stream.Initial(events)
	}
	return c.WatchEvents(ctx, o.forName, client.EventHandler{Synced: stream.Initial, Changed: stream.Change})
}
