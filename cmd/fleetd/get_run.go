package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/cli/labels"
)

// getOptions are get's flags beyond the client's.
type getOptions struct {
	output      string
	selector    string
	sortBy      string
	watch       bool
	watchEvents bool
}

func (o *getOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "output format: "+outputFormats)
	f.StringVarP(&o.selector, "selector", "l", "", "label selector: k=v, k!=v, 'k in (a,b)', 'k notin (a,b)', k, !k; a comma means and")
	f.StringVar(&o.sortBy, "sort-by", "", "sort the list by a JSONPath field, e.g. .metadata.creationTimestamp or .status.restarts")
	f.BoolVarP(&o.watch, "watch", "w", false, "members only: after the list, print one line per change until fleetd stops or you press Ctrl-C")
	f.BoolVar(&o.watchEvents, "output-watch-events", false, "with --watch, print each line's event (ADDED, MODIFIED, DELETED) first")
}

// runGet is `fleetd get KIND [NAME]`.
func runGet(cmd *cobra.Command, flags *clientFlags, opts getOptions, args []string) error {
	r, ok := lookupResource(args[0])
	if !ok {
		return usageErrorf(cmd, "unknown resource type %q; fleetd serves: %s", args[0], resourceNames)
	}
	format, err := parseOutput(opts.output)
	if err != nil {
		return usageErrorf(cmd, "-o: %v", err)
	}
	sel, err := labels.Parse(opts.selector)
	if err != nil {
		return usageErrorf(cmd, "-l: %v", err)
	}
	if opts.sortBy != "" {
		if err := sortBy([]any{}, opts.sortBy); err != nil {
			return usageErrorf(cmd, "%v", err)
		}
	}
	var name string
	if len(args) == 2 {
		name = args[1]
		if opts.selector != "" {
			return usageErrorf(cmd, "a name and -l cannot be combined: the name picks one %s", r.kind)
		}
	}
	if opts.watchEvents && !opts.watch {
		return usageErrorf(cmd, "--output-watch-events needs --watch")
	}
	if opts.watch && r.plural != "members" {
		return usageErrorf(cmd, "only members can be watched; %s change only when their manifests do", r.plural)
	}
	c, err := flags.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if opts.watch {
		if name != "" {
			// The stream names members by name: resolve a pane, terminal
			// or session id first.
			m, err := resolveMember(ctx, c, name)
			if err != nil {
				return err
			}
			name = m.Name
		}
		return watchMembers(ctx, c, watchSpec{name: name, sel: sel, sortBy: opts.sortBy, format: format, events: opts.watchEvents},
			cmd.OutOrStdout(), time.Now)
	}
	objs, err := r.fetch(ctx, c, name)
	if err != nil {
		return err
	}
	if name == "" {
		kept := objs[:0]
		for _, o := range objs {
			if sel.Matches(o.GetMeta().Labels) {
				kept = append(kept, o)
			}
		}
		objs = kept
		if err := sortBy(objs, opts.sortBy); err != nil {
			return err
		}
	}
	return r.printObjects(cmd.OutOrStdout(), objs, format, name != "", time.Now())
}
