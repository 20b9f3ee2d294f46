package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

func newInboxCmd() *cobra.Command {
	var flags clientFlags
	var opts inboxOptions
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
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usageErrorf(cmd, "inbox takes no arguments, got %d", len(args))
			}
			switch opts.output {
			case "", "wide", "json", "yaml":
			default:
				return usageErrorf(cmd, "unknown output format %q; want wide, yaml or json", opts.output)
			}
			if opts.timeout <= 0 || opts.timeout > mcp.MaxTimeout {
				return usageErrorf(cmd, "--timeout %s: want more than 0s, at most 24h", opts.timeout)
			}
			if opts.limit < 1 || opts.limit > maxInboxLimit {
				return usageErrorf(cmd, "--limit %d: want 1 to %d", opts.limit, maxInboxLimit)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := flags.client()
			if err != nil {
				return err
			}
			return inbox(cmd.Context(), c, opts, cmd.OutOrStdout(), cmd.ErrOrStderr(), time.Now)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.wait, "wait", false, "when the mailbox is empty, wait for a message (up to --timeout)")
	f.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "with --wait, how long to wait for a message")
	f.BoolVar(&opts.ack, "ack", false, "acknowledge the messages printed, once printed; they are not shown again")
	f.IntVar(&opts.limit, "limit", 100, "print at most this many messages, oldest first")
	f.StringVarP(&opts.output, "output", "o", "", "output format: wide, yaml or json")
	flags.register(cmd)
	return cmd
}

type inboxOptions struct {
	wait, ack bool
	timeout   time.Duration
	limit     int
	output    string
}

// maxInboxLimit is the gateway's page bound (bridge_poll's limit).
const maxInboxLimit = 1000

// textWidth is how much of a message the default table shows.
const textWidth = 80

// inbox runs `fleetd inbox`: one poll of the caller's mailbox, printed,
// then (--ack) the printed messages acknowledged.
func inbox(ctx context.Context, c *apiClient, opts inboxOptions, out, errOut io.Writer, now func() time.Time) error {
	fail := func(format string, args ...any) error {
		fmt.Fprintln(errOut, "fleetd inbox: "+termtext.Line(fmt.Sprintf(format, args...)))
		return &exitError{code: 1}
	}
	q := url.Values{"limit": {strconv.Itoa(opts.limit)}}
	if opts.wait {
		q.Set("wait", "true")
		q.Set("timeoutMs", strconv.FormatInt(opts.timeout.Milliseconds(), 10))
		held := *c // the poll is held up to the timeout: bound the request by it instead
		held.http = withTimeout(c.http, opts.timeout+callMargin)
		c = &held
	}
	var page mcp.PollOutput
	if err := c.get(ctx, "/inbox?"+q.Encode(), &page); err != nil {
		return fail("%v", err)
	}
	if len(page.Messages) == 0 && opts.wait {
		return fail("no message within %s", opts.timeout)
	}
	if err := printInbox(out, page, opts.output, now()); err != nil {
		return err
	}
	if page.More > 0 {
		fmt.Fprintf(errOut, "fleetd inbox: %d more messages; acknowledge these (--ack) to see the next\n", page.More)
	}
	if !opts.ack || len(page.Messages) == 0 {
		return nil
	}
	ids := make([]string, len(page.Messages))
	for i, m := range page.Messages {
		ids[i] = m.ID
	}
	var res mcp.AckOutput
	if _, err := c.post(ctx, "/inbox/ack", mcp.AckInput{IDs: ids}, &res); err != nil {
		return fail("acknowledge %d messages: %v", len(ids), err)
	}
	return nil
}

func printInbox(w io.Writer, page mcp.PollOutput, output string, now time.Time) error {
	switch output {
	case "json", "yaml":
		return writeStructured(w, page, output)
	}
	if len(page.Messages) == 0 {
		_, err := fmt.Fprintln(w, "No messages.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "FROM\tKIND\tAGE\tTEXT"
	if output == "wide" {
		header = "ID\tFROM\tKIND\tTURN\tAGE\tTEXT"
	}
	fmt.Fprintln(tw, header)
	for _, m := range page.Messages {
		age := "-"
		if t, err := time.Parse(time.RFC3339Nano, m.CreatedAt); err == nil {
			age = humanDuration(now.Sub(t))
		}
		text := termtext.Line(m.Content)
		if output == "wide" {
			fmt.Fprintln(tw, strings.Join([]string{termtext.Line(m.ID), termtext.Line(m.From), termtext.Line(m.Kind), dash(termtext.Line(m.TurnID)), age, text}, "\t"))
			continue
		}
		fmt.Fprintln(tw, strings.Join([]string{termtext.Line(m.From), termtext.Line(m.Kind), age, shorten(text, textWidth)}, "\t"))
	}
	return tw.Flush()
}

// shorten cuts s to at most n characters, marking the cut with "…".
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// withTimeout is hc with its overall timeout set to d.
func withTimeout(hc *http.Client, d time.Duration) *http.Client {
	c := *hc
	c.Timeout = d
	return &c
}
