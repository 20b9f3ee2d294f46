package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/cli/printers"
	"github.com/fleetd-dev/fleetd/mcp"
)

// inboxOptions are `fleetd inbox`'s.
type inboxOptions struct {
	ioStreams
	serverOptions
	outputOptions
	wait, ack bool
	timeout   time.Duration
	limit     int
	args      []string
}

// maxInboxLimit is the gateway's page bound (bridge_poll's limit).
const maxInboxLimit = 1000

func newInboxCmd() *cobra.Command {
	o := &inboxOptions{}
	cmd := &cobra.Command{
		Use:   "inbox [--wait] [--ack]",
		Short: "Print the primary's mailbox: replies to detached sends, questions, worker_gone notices",
		Long: `inbox prints the messages waiting in the primary's mailbox of the running
fleetd (GET /inbox, the same mailbox bridge_poll reads): replies to sends that
did not wait (fleetd send --no-wait) or timed out, questions, progress notes,
members' first-prompt outcomes, worker_gone and delivery_failed notices —
oldest first, as a table of FROM, KIND, AGE and TEXT (-o wide adds the
message and turn ids and shows TEXT whole; -o json and -o yaml print
everything).

Messages stay in the mailbox until acknowledged: --ack acknowledges the ones
printed, after printing them (a message is never lost, and may be printed
twice if inbox is stopped between the two). --wait waits, up to --timeout,
for a message when there is none; if none arrives inbox exits 1. With the
holder of $FLEETD_TOKEN (inside a worker's pane) it is that worker's mailbox.`,
		Example: `  fleetd inbox
  fleetd inbox --wait --timeout 5m
  fleetd inbox --ack -o json`,
		Args: cobra.ArbitraryArgs, // Validate checks them
		RunE: runVerb(o),
	}
	f := cmd.Flags()
	f.BoolVar(&o.wait, "wait", false, "when the mailbox is empty, wait for a message (up to --timeout)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "with --wait, how long to wait for a message")
	f.BoolVar(&o.ack, "ack", false, "acknowledge the messages printed, once printed; they are not shown again")
	f.IntVar(&o.limit, "limit", 100, "print at most this many messages, oldest first")
	o.outputOptions.addFlags(cmd, "wide", "yaml", "json")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *inboxOptions) Complete(cmd *cobra.Command, args []string) error {
	o.serverOptions.complete(cmd)
	o.args = args
	return nil
}

func (o *inboxOptions) Validate() error {
	if len(o.args) != 0 {
		return fmt.Errorf("inbox takes no arguments, got %d", len(o.args))
	}
	if err := o.outputOptions.validate(); err != nil {
		return err
	}
	if o.timeout <= 0 || o.timeout > mcp.MaxTimeout {
		return fmt.Errorf("--timeout %s: want more than 0s, at most 24h", o.timeout)
	}
	if o.limit < 1 || o.limit > maxInboxLimit {
		return fmt.Errorf("--limit %d: want 1 to %d", o.limit, maxInboxLimit)
	}
	return nil
}

// Run polls the caller's mailbox once, prints the page, then (--ack)
// acknowledges the messages printed.
func (o *inboxOptions) Run(ctx context.Context) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	var wait time.Duration
	if o.wait {
		wait = o.timeout
	}
	page, err := c.Inbox(ctx, o.limit, wait)
	if err != nil {
		return o.fail("inbox", "%v", err)
	}
	if len(page.Messages) == 0 && o.wait {
		return o.fail("inbox", "no message within %s", o.timeout)
	}
	if err := printers.PrintInbox(o.out, page, o.format, time.Now()); err != nil {
		return err
	}
	if page.More > 0 {
		fmt.Fprintf(o.errOut, "fleetd inbox: %d more messages; acknowledge these (--ack) to see the next\n", page.More)
	}
	if !o.ack || len(page.Messages) == 0 {
		return nil
	}
	ids := make([]string, len(page.Messages))
	for i, m := range page.Messages {
		ids[i] = m.ID
	}
	if err := c.Ack(ctx, ids); err != nil {
		return o.fail("inbox", "acknowledge %d messages: %v", len(ids), err)
	}
	return nil
}
