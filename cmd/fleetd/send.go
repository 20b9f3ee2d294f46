package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// sendOptions are `fleetd send NAME TEXT`'s.
type sendOptions struct {
	ioStreams
	serverOptions
	timeout time.Duration
	noWait  bool
	turn    string
	args    []string
}

func newSendCmd() *cobra.Command {
	o := &sendOptions{}
	cmd := &cobra.Command{
		Use:   "send NAME TEXT",
		Short: "Give a member a task as the primary and print its reply",
		Long: `send calls bridge_send on the running fleetd's MCP gateway as the primary: TEXT
is typed into member NAME's agent when it is idle, and send waits for the
outcome and prints it:

  reply      the member's answer (bridge_reply)
  question   the member asks something (bridge_ask); answer it with
             fleetd send NAME --turn ID ANSWER
  turn_done  the member ended its turn without replying: the end of its
             terminal is printed

If --timeout passes first, send exits 1 naming the turn, which stays open:
its reply lands in the primary's mailbox. With --no-wait send returns as soon
as the message is queued.`,
		Example: `  fleetd send reviewer "review the open pull request"
  fleetd send reviewer --turn 01J9Z... "use config.yaml"
  fleetd send reviewer --no-wait "run the nightly checks"`,
		ValidArgsFunction: completeMemberArg(&o.serverOptions, 0),
		Args:              cobra.ArbitraryArgs, // Validate checks them
		RunE:              runVerb(o),
	}
	f := cmd.Flags()
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to wait for the outcome; the turn stays open after it")
	f.BoolVar(&o.noWait, "no-wait", false, "return once the message is queued; the reply lands in the primary's mailbox")
	f.StringVar(&o.turn, "turn", "", "continue this turn: answer the question the member asked in it")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *sendOptions) Complete(cmd *cobra.Command, args []string) error {
	o.serverOptions.complete(cmd)
	o.args = args
	return nil
}

func (o *sendOptions) Validate() error {
	switch {
	case len(o.args) != 2:
		return fmt.Errorf("want a member name and a text, got %d arguments", len(o.args))
	case strings.TrimSpace(o.args[1]) == "":
		return fmt.Errorf("the text is empty")
	case o.timeout <= 0:
		return fmt.Errorf("--timeout must be positive")
	}
	return nil
}

// Run makes one bridge_send call and prints its outcome (or, for a timeout
// or an error, says so on the error stream with exit 1). What the member
// and the gateway wrote is printed safe for a terminal (package termtext):
// the member's text as lines, names, ids and errors on one line.
func (o *sendOptions) Run(ctx context.Context) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	name := o.args[0]
	got, err := c.Send(ctx, mcp.SendInput{Content: o.args[1], SessionID: name, TimeoutMs: o.timeout.Milliseconds(), Wait: !o.noWait, TurnID: o.turn})
	var te *mcp.ToolError
	if errors.As(err, &te) && te.Code == "not_found" {
		if _, found, lerr := c.LiveMember(ctx, name); lerr == nil && !found {
			return o.noMember(ctx, &o.serverOptions, c, "send", name)
		}
	}
	if err != nil {
		return o.fail("send", "%v", err)
	}
	who := name
	if got.Name != "" {
		who = got.Name
	}
	who, turn, text := termtext.Line(who), termtext.Line(got.TurnID), termtext.Text(got.Text)
	switch got.Outcome {
	case "reply":
		fmt.Fprint(o.out, withNewline(text))
	case "question":
		fmt.Fprintf(o.out, "%s asks (turn %s):\n%s", who, turn, withNewline(indent(text)))
		fmt.Fprintf(o.out, "Answer with: %s ANSWER\n", o.command("send", termtext.Line(name), "--turn", turn))
	case "turn_done":
		fmt.Fprintf(o.out, "%s ended its turn %s without replying; the end of its terminal:\n%s", who, turn, withNewline(indent(text)))
	case "dispatched":
		ids := "turn " + turn
		if got.DispatchID != "" { // none for a member on another node: its node queues the message
			ids += ", message " + termtext.Line(got.DispatchID)
		}
		fmt.Fprintf(o.out, "queued for %s (%s); the reply will land in the primary's mailbox: %s\n", who, ids, o.command("inbox", "--wait"))
	case "timeout":
		return o.fail("send", "no outcome from %s within %s; turn %s stays open and its reply will land in the primary's mailbox: %s", who, o.timeout, turn, o.command("inbox", "--wait"))
	default:
		return o.fail("send", "bridge_send: unknown outcome %q", got.Outcome)
	}
	return nil
}

func withNewline(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// indent prefixes every line of s with two spaces.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n")
}
