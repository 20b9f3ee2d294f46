package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/mcpbridge"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/internal/version"
	fleetmcp "github.com/fleetd-dev/fleetd/mcp"
)

func newSendCmd() *cobra.Command {
	var flags clientFlags
	var opts sendOptions
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
		ValidArgsFunction: completeMemberArg(&flags, 0),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErrorf(cmd, "want a member name and a text, got %d arguments", len(args))
			}
			if strings.TrimSpace(args[1]) == "" {
				return usageErrorf(cmd, "the text is empty")
			}
			if opts.timeout <= 0 {
				return usageErrorf(cmd, "--timeout must be positive")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := flags.client()
			if err != nil {
				return err
			}
			opts.name, opts.text = args[0], args[1]
			return send(cmd.Context(), c, opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "how long to wait for the outcome; the turn stays open after it")
	f.BoolVar(&opts.noWait, "no-wait", false, "return once the message is queued; the reply lands in the primary's mailbox")
	f.StringVar(&opts.turn, "turn", "", "continue this turn: answer the question the member asked in it")
	flags.register(cmd)
	return cmd
}

type sendOptions struct {
	name, text string
	timeout    time.Duration
	noWait     bool
	turn       string
}

// callMargin is how much longer than the gateway's own timeout send waits
// for its answer, so that the gateway's timeout outcome arrives first.
const callMargin = 30 * time.Second

// send runs `fleetd send`: one bridge_send call, its outcome printed on out
// (or, for a timeout or an error, on errOut with exit 1). What the member
// and the gateway wrote is printed safe for a terminal (package termtext):
// the member's text as lines, names, ids and errors on one line.
func send(ctx context.Context, c *apiClient, opts sendOptions, out, errOut io.Writer) error {
	fail := func(format string, args ...any) error {
		fmt.Fprintln(errOut, "fleetd send: "+termtext.Line(fmt.Sprintf(format, args...)))
		return &exitError{code: 1}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout+callMargin)
	defer cancel()
	session, err := c.mcpSession(ctx)
	if err != nil {
		return fail("%v", err)
	}
	defer session.Close()
	args := map[string]any{
		"content":   opts.text,
		"sessionId": opts.name,
		"timeoutMs": opts.timeout.Milliseconds(),
		"wait":      !opts.noWait,
	}
	if opts.turn != "" {
		args["turnId"] = opts.turn
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "bridge_send", Arguments: args})
	if err != nil {
		return fail("bridge_send: %v", err)
	}
	if res.IsError {
		te := toolError(res)
		return fail("%s: %s", te.Code, te.Message)
	}
	var got fleetmcp.SendOutput
	if err := decodeStructured(res, &got); err != nil {
		return fail("bridge_send: %v", err)
	}
	who := opts.name
	if got.Name != "" {
		who = got.Name
	}
	who, turn, text := termtext.Line(who), termtext.Line(got.TurnID), termtext.Text(got.Text)
	switch got.Outcome {
	case "reply":
		fmt.Fprint(out, withNewline(text))
	case "question":
		fmt.Fprintf(out, "%s asks (turn %s):\n%s", who, turn, withNewline(indent(text)))
		fmt.Fprintf(out, "Answer with: fleetd send %s --turn %s ANSWER\n", termtext.Line(opts.name), turn)
	case "turn_done":
		fmt.Fprintf(out, "%s ended its turn %s without replying; the end of its terminal:\n%s", who, turn, withNewline(indent(text)))
	case "dispatched":
		ids := "turn " + turn
		if got.DispatchID != "" { // none for a member on another node: its node queues the message
			ids += ", message " + termtext.Line(got.DispatchID)
		}
		fmt.Fprintf(out, "queued for %s (%s); the reply will land in the primary's mailbox (bridge_poll)\n", who, ids)
	case "timeout":
		return fail("no outcome from %s within %s; turn %s stays open and its reply will land in the primary's mailbox (bridge_poll)", who, opts.timeout, turn)
	default:
		return fail("bridge_send: unknown outcome %q", got.Outcome)
	}
	return nil
}

// mcpSession connects to the gateway at the server's /mcp as the holder
// of c's token. The HTTP client has no overall timeout: a held bridge_send
// call is bounded by its context instead.
func (c *apiClient) mcpSession(ctx context.Context) (*mcp.ClientSession, error) {
	endpoint := c.base + "/mcp"
	bearer, err := mcpbridge.NewBearerTransport(endpoint, c.token, nil)
	if err != nil {
		return nil, err
	}
	auth := &refusalWatch{base: bearer}
	hc := &http.Client{Transport: auth}
	client := mcp.NewClient(&mcp.Implementation{Name: "fleetd-send", Version: version.Version}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		if auth.refused.Load() {
			return nil, fmt.Errorf("the gateway at %s refused the token: use the primary token of the fleetd you are talking to (--state-dir, --server)", endpoint)
		}
		return nil, fmt.Errorf("cannot reach fleetd's gateway at %s (is `fleetd serve` running?): %w", endpoint, err)
	}
	return session, nil
}

// refusalWatch notes whether the gateway refused the token (401); the
// token itself is added by mcpbridge's BearerTransport, only for requests to
// the gateway's own origin.
type refusalWatch struct {
	base    http.RoundTripper
	refused atomic.Bool
}

func (t *refusalWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.refused.Store(true)
	}
	return resp, err
}

// toolError reads a tool error result: the gateway's structured
// {code, message}, or failing that its text.
func toolError(res *mcp.CallToolResult) fleetmcp.ToolError {
	var te fleetmcp.ToolError
	if decodeStructured(res, &te) == nil && te.Code != "" {
		return te
	}
	text := contentText(res)
	if code, msg, ok := strings.Cut(text, ": "); ok && !strings.ContainsAny(code, " \n") {
		return fleetmcp.ToolError{Code: code, Message: msg}
	}
	return fleetmcp.ToolError{Code: "error", Message: text}
}

// decodeStructured decodes a tool result's structured content into out.
func decodeStructured(res *mcp.CallToolResult, out any) error {
	if res.StructuredContent == nil {
		return errors.New("the result has no structured content")
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

func contentText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
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
