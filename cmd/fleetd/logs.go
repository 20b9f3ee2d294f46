package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/cli/printers"
	"github.com/fleetd-dev/fleetd/internal/tail"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// logsOptions are `fleetd logs MEMBER`'s.
type logsOptions struct {
	ioStreams
	serverOptions
	lines  int
	follow bool
	args   []string
}

func newLogsCmd() *cobra.Command {
	o := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs MEMBER [--lines N] [-f]",
		Short: "Print the end of a member's terminal, and follow it with -f",
		Long: `logs prints what member MEMBER's herdr pane shows, read by the running fleetd
(GET /members/MEMBER/logs) from herdr's visible screen: reading never scrolls
or otherwise touches the agent. --lines N (or kubectl's --tail N) keeps the last N lines
(default: the whole screen, which is all herdr shows without scrolling).

With -f (--follow) logs keeps printing the lines that appear, until the
member is deleted or you stop it. fleetd reads the screen again as soon as
herdr reports the agent's status changed, and at least once a second (herdr
has no event for new output). When the screen changed other than by new lines
at its bottom — a full-screen agent repainting it, or the member got a new
pane — the whole screen is printed again.

MEMBER is the member's name, pane id, terminal id or session id. What the
agent wrote is printed safe for a terminal: escape sequences dropped, other
controls shown escaped.`,
		Example: `  fleetd logs reviewer
  fleetd logs reviewer --lines 20
  fleetd logs reviewer -f`,
		Args: cobra.ArbitraryArgs, // Validate checks them
		RunE: runVerb(o),
	}
	f := cmd.Flags()
	f.IntVar(&o.lines, "lines", 0, "print only the last N lines of the screen (0 or -1: all of it)")
	f.IntVar(&o.lines, "tail", 0, "the same as --lines (kubectl's spelling)")
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing new output until the member is deleted")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *logsOptions) Complete(cmd *cobra.Command, args []string) error {
	o.serverOptions.complete(cmd)
	o.args = args
	if o.lines == -1 { // kubectl's --tail=-1: everything
		o.lines = 0
	}
	return nil
}

func (o *logsOptions) Validate() error {
	if len(o.args) != 1 {
		return fmt.Errorf("want one member, got %d arguments", len(o.args))
	}
	if err := tail.CheckLines(o.lines); err != nil {
		return fmt.Errorf("--lines %d: want 1 to %d, or 0 for the whole screen", o.lines, tail.MaxLines)
	}
	return nil
}

// Run prints one read, or with -f the stream, of the member's screen.
func (o *logsOptions) Run(ctx context.Context) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	ref := o.args[0]
	if !o.follow {
		res, err := c.Logs(ctx, ref, o.lines)
		if err != nil {
			return o.fail("logs", "%s", memberErr(ref, err))
		}
		printers.PrintLines(o.out, res.Lines)
		return nil
	}
	err = c.FollowLogs(ctx, ref, o.lines, func(f mcp.LogFrame) { printers.PrintLines(o.out, f.Lines) })
	switch {
	case errors.Is(err, client.ErrMemberGone):
		fmt.Fprintf(o.errOut, "fleetd logs: member %s was deleted\n", termtext.Line(ref))
	case err != nil:
		return o.fail("logs", "%s", memberErr(ref, err))
	}
	return nil
}

// memberErr says what a failed request about member ref means.
func memberErr(ref string, err error) string {
	if client.IsNotFound(err) {
		return fmt.Sprintf("member %q not found", ref)
	}
	return err.Error()
}
