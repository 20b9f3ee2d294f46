package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/cli/printers"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// rolloutOptions are every `fleetd rollout` subcommand's: which one (verb),
// the object (profile/NAME or member/NAME, or the two as words), and each
// subcommand's flags.
type rolloutOptions struct {
	ioStreams
	*serverOptions // rollout's, shared by its subcommands
	verb           string
	args           []string
	kind, name     string
	// status
	watch   bool
	timeout time.Duration
	// history (revision) and undo (toRevision)
	revision, toRevision int64
	// restart
	now bool
}

func newRolloutCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout status|history|undo|restart|pause|resume profile/NAME|member/NAME",
		Short: "Follow, undo, restart, pause and resume the rollout of a Profile or Member",
		Long: `rollout manages how a change reaches running agents, as kubectl rollout does
for Deployments. A change of a Profile (or of a Tenant its members use) rolls
out to its members: each member's agent is replaced at its next idle moment,
spec.rollout.maxUnavailable of them at a time (1 by default), the next one only
once the new agent is Ready; a replacement that does not become Ready stops
the rollout. A Member's own spec change is its own rollout of one.

fleetd keeps the last 10 revisions of every Profile and Member: history lists
them, undo writes one back through the desired state (the manifest file is
edited in place, comments kept; or etcd).`,
		Example: `  fleetd rollout status profile/codex
  fleetd rollout history profile/codex
  fleetd rollout undo profile/codex --to-revision=2
  fleetd rollout restart member/reviewer --now
  fleetd rollout pause profile/codex`,
		Args: cobra.NoArgs,
	}
	server := &serverOptions{}
	server.addFlagsTo(cmd.PersistentFlags())
	for _, sub := range []struct {
		verb, short, long, example string
		flags                      func(*cobra.Command, *rolloutOptions)
	}{
		{"status", "Show a rollout's progress; with --watch (the default) follow it until it is done or failed",
			`status prints where the rollout stands — every member updated and Ready, or
how many are, and what the members being replaced wait for — and, with
--watch (the default), a new line at each change until the rollout is
complete (exit 0) or failed (exit 1: a replacement did not become Ready, or
the member is crash-looping). A paused rollout is waited for.`,
			"  fleetd rollout status profile/codex\n  fleetd rollout status member/reviewer --watch=false",
			func(c *cobra.Command, o *rolloutOptions) {
				c.Flags().BoolVarP(&o.watch, "watch", "w", true, "follow the rollout until it is done or failed")
				c.Flags().DurationVar(&o.timeout, "timeout", 0, "with --watch, give up after this long (exit 1); 0 waits as long as it takes")
			}},
		{"history", "List the revisions kept of a Profile or Member, with their change causes",
			`history lists the last 10 revisions, oldest first, each with its change cause:
the object's fleetd.dev/change-cause annotation when it was written, else the
spec fields that changed. --revision shows one revision's spec.`,
			"  fleetd rollout history profile/codex\n  fleetd rollout history profile/codex --revision=2",
			func(c *cobra.Command, o *rolloutOptions) {
				c.Flags().Int64Var(&o.revision, "revision", 0, "show the spec of this revision")
			}},
		{"undo", "Write an earlier revision of a Profile or Member back (the previous one unless --to-revision)",
			`undo writes the spec of an earlier revision back through the desired state,
as apply would: the manifest file is edited in place, comments kept (or etcd
is written). The revision written back becomes the newest. It then rolls out
as any change does. A Profile written back is held to the subscription guard.`,
			"  fleetd rollout undo profile/codex\n  fleetd rollout undo member/reviewer --to-revision=3",
			func(c *cobra.Command, o *rolloutOptions) {
				c.Flags().Int64Var(&o.toRevision, "to-revision", 0, "the revision to go back to; 0 is the previous one")
			}},
		{"restart", "Replace the agents of a Profile's members, or a Member's, at their next idle moment (--now: at once)",
			`restart replaces each agent with a new one of the same definition, its session
resumed: a member's at its next idle moment; a profile's members one rollout
turn at a time (its fleetd.dev/restartedAt annotation is written, which rolls
out as a change does). --now replaces them at once, whatever they are doing —
a turn in progress is lost — and also forces a replacement already waiting
for idle. A member's restart is made by the fleetd of the node that runs it.`,
			"  fleetd rollout restart profile/codex\n  fleetd rollout restart member/reviewer --now",
			func(c *cobra.Command, o *rolloutOptions) {
				c.Flags().BoolVar(&o.now, "now", false, "replace at once, even an agent in the middle of a turn")
			}},
		{"pause", "Stop a Profile's rollout: no further member is replaced (spec.rollout.paused)",
			`pause writes spec.rollout.paused: true into the profile (its manifest file, or
etcd): no further member is replaced, and a member whose turn waited for its
agent to be idle keeps its agent. Pausing a paused profile is an error.`,
			"  fleetd rollout pause profile/codex", nil},
		{"resume", "Go on with a paused Profile's rollout, or one a failed replacement stopped",
			`resume clears spec.rollout.paused and the stop a replacement that did not become
Ready put on the rollout, which goes on with the next member. Resuming a
rollout that is neither paused nor stopped is an error.`,
			"  fleetd rollout resume profile/codex", nil},
	} {
		o := &rolloutOptions{verb: sub.verb, serverOptions: server}
		c := &cobra.Command{
			Use:     sub.verb + " profile/NAME|member/NAME",
			Short:   sub.short,
			Long:    sub.long,
			Example: sub.example,
			Args:    cobra.RangeArgs(1, 2),
			RunE:    runVerb(o),
		}
		if sub.verb == "pause" || sub.verb == "resume" {
			c.Use = sub.verb + " profile/NAME"
		}
		if sub.flags != nil {
			sub.flags(c, o)
		}
		cmd.AddCommand(c)
	}
	return cmd
}

func (o *rolloutOptions) Complete(cmd *cobra.Command, args []string) error {
	o.serverOptions.complete(cmd)
	o.args = args
	return nil
}

// Validate reads the object: TYPE/NAME, or TYPE NAME, TYPE a profile or a
// member (kubectl's forms).
func (o *rolloutOptions) Validate() error {
	typ, name, ok := strings.Cut(o.args[0], "/")
	switch {
	case len(o.args) == 2 && !ok:
		name = o.args[1]
	case len(o.args) == 2:
		return fmt.Errorf("want TYPE/NAME or TYPE NAME, got %d arguments", len(o.args))
	case !ok:
		return fmt.Errorf("missing the name: want profile/NAME or member/NAME, got %q", o.args[0])
	}
	r, known := lookupResource(typ)
	switch {
	case !known || (r.kind != v1alpha1.KindProfile && r.kind != v1alpha1.KindMember):
		return fmt.Errorf("unknown resource type %q; rollouts are of profiles and members", typ)
	case name == "":
		return errors.New("missing the name: want profile/NAME or member/NAME")
	case (o.verb == "pause" || o.verb == "resume") && r.kind != v1alpha1.KindProfile:
		return fmt.Errorf("rollout %s is for profiles: a member's own update has no rollout to stop", o.verb)
	case o.revision < 0 || o.toRevision < 0:
		return errors.New("a revision is a number from 1")
	case o.timeout < 0:
		return fmt.Errorf("--timeout %s: want 0 (no limit) or more", o.timeout)
	}
	o.kind, o.name = r.kind, name
	return nil
}

func (o *rolloutOptions) Run(ctx context.Context) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	switch o.verb {
	case "status":
		return o.status(ctx, c)
	case "history":
		return o.history(ctx, c)
	}
	var res mcp.RolloutResult
	switch o.verb {
	case "undo":
		res, err = c.RolloutUndo(ctx, o.kind, o.name, o.toRevision)
	case "restart":
		res, err = c.RolloutRestart(ctx, o.kind, o.name, o.now)
	default:
		res, err = c.RolloutPause(ctx, o.kind, o.name, o.verb == "pause")
	}
	if err != nil {
		return o.failed(err)
	}
	ref := strings.ToLower(o.kind) + "/" + termtext.Line(res.Name)
	switch {
	case res.Result == "skipped":
		fmt.Fprintf(o.out, "%s %s\n", ref, termtext.Line(res.Message))
	case res.Message != "":
		fmt.Fprintf(o.out, "%s %s (%s)\n", ref, res.Result, termtext.Line(res.Message))
	default:
		fmt.Fprintf(o.out, "%s %s\n", ref, res.Result)
	}
	return nil
}

// failed says why the running fleetd refused or could not answer, and
// makes the process exit 1.
func (o *rolloutOptions) failed(err error) error {
	return o.fail("rollout "+o.verb, "%s", err)
}

// status prints the rollout's line once, or, watching, each new line
// until it is done (exit 0) or failed (exit 1).
func (o *rolloutOptions) status(ctx context.Context, c *client.Client) error {
	if !o.watch {
		v, err := c.Rollout(ctx, o.kind, o.name)
		if err != nil {
			return o.failed(err)
		}
		return o.statusLine(v, new(string))
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	var last string
	errDone := errors.New("done")
	err := c.WatchRollout(ctx, o.kind, o.name, func(v mcp.RolloutView) (bool, error) {
		if err := o.statusLine(v, &last); err != nil {
			return true, err
		}
		if v.State == mcp.RolloutComplete {
			return true, errDone
		}
		return false, nil
	})
	switch {
	case errors.Is(err, errDone):
		return nil
	case err != nil:
		var ee *exitError
		if errors.As(err, &ee) {
			return err
		}
		return o.failed(err)
	case ctx.Err() != nil:
		return o.fail("rollout status", "timed out waiting for the rollout to finish (--timeout %s)", o.timeout)
	}
	return nil
}

// statusLine prints v's status line unless it is last's, and fails (exit
// 1) for a failed rollout.
func (o *rolloutOptions) statusLine(v mcp.RolloutView, last *string) error {
	line, _, failed := printers.RolloutStatus(v)
	if failed {
		return o.fail("rollout status", "%s", line)
	}
	if line != *last {
		fmt.Fprintln(o.out, line)
		*last = line
	}
	return nil
}

// history prints the revisions kept, or one revision's spec.
func (o *rolloutOptions) history(ctx context.Context, c *client.Client) error {
	if o.revision > 0 {
		rv, err := c.Revision(ctx, o.kind, o.name, o.revision)
		if err != nil {
			return o.failed(err)
		}
		return printers.RolloutRevision(o.out, rv, time.Now())
	}
	v, err := c.Rollout(ctx, o.kind, o.name)
	if err != nil {
		return o.failed(err)
	}
	return printers.RolloutHistory(o.out, v)
}
