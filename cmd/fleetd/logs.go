package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/tail"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

func newLogsCmd() *cobra.Command {
	var flags clientFlags
	var opts logsOptions
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
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf(cmd, "want one member, got %d arguments", len(args))
			}
			if opts.lines == -1 { // kubectl's --tail=-1: everything
				opts.lines = 0
			}
			if err := tail.CheckLines(opts.lines); err != nil {
				return usageErrorf(cmd, "--lines %d: want 1 to %d, or 0 for the whole screen", opts.lines, tail.MaxLines)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := flags.client()
			if err != nil {
				return err
			}
			opts.member = args[0]
			return logs(cmd.Context(), c, opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.lines, "lines", 0, "print only the last N lines of the screen (0 or -1: all of it)")
	f.IntVar(&opts.lines, "tail", 0, "the same as --lines (kubectl's spelling)")
	f.BoolVarP(&opts.follow, "follow", "f", false, "keep printing new output until the member is deleted")
	flags.register(cmd)
	return cmd
}

type logsOptions struct {
	member string
	lines  int
	follow bool
}

// maxEventBytes bounds one server-sent event line that logs reads: a frame
// is at most one screen, far smaller.
const maxEventBytes = 8 << 20

// logs runs `fleetd logs`: one read, or with follow the event stream, its
// lines printed safe for a terminal on out.
func logs(ctx context.Context, c *apiClient, opts logsOptions, out, errOut io.Writer) error {
	fail := func(format string, args ...any) error {
		fmt.Fprintln(errOut, "fleetd logs: "+termtext.Line(fmt.Sprintf(format, args...)))
		return &exitError{code: 1}
	}
	path := "/members/" + url.PathEscape(opts.member) + "/logs?lines=" + strconv.Itoa(opts.lines)
	if !opts.follow {
		var res mcp.LogsOutput
		if err := c.get(ctx, path, &res); err != nil {
			return fail("%s", memberErr(opts.member, err))
		}
		printLines(out, res.Lines)
		return nil
	}
	resp, err := c.openStream(ctx, path+"&follow=1")
	if err != nil {
		return fail("%s", memberErr(opts.member, err))
	}
	defer resp.Body.Close()
	err = readEvents(resp.Body, maxEventBytes, func(event string, data []byte) (bool, error) {
		switch event {
		case "lines":
			var f mcp.LogFrame
			if err := json.Unmarshal(data, &f); err != nil {
				return false, fmt.Errorf("decode a lines event: %w", err)
			}
			printLines(out, f.Lines)
			return true, nil
		case "gone":
			fmt.Fprintf(errOut, "fleetd logs: member %s was deleted\n", termtext.Line(opts.member))
			return false, nil
		case "error":
			var te mcp.ToolError
			if err := json.Unmarshal(data, &te); err != nil || te.Code == "" {
				return false, fmt.Errorf("the stream ended with an error: %s", data)
			}
			return false, fmt.Errorf("%s (%s)", te.Message, te.Code)
		}
		return true, nil // an event a newer fleetd sends
	})
	switch {
	case errors.Is(err, io.EOF):
		return fail("fleetd ended the stream (was it stopped?)")
	case err != nil:
		return fail("%v", err)
	}
	return nil
}

// memberErr says what a failed request about member ref means.
func memberErr(ref string, err error) string {
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusNotFound {
		return fmt.Sprintf("member %q not found", ref)
	}
	return err.Error()
}

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, termtext.Text(l))
	}
}

// readEvents reads a server-sent event stream and calls on for each event
// until on says stop (nil, or its error) or the stream ends (io.EOF). A line
// longer than limit bytes is an error. Both `logs -f` and `get -w` read
// their streams with it.
func readEvents(r io.Reader, limit int, on func(event string, data []byte) (more bool, err error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), limit)
	var event string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event == "" && data == nil {
				continue
			}
			more, err := on(event, data)
			if err != nil || !more {
				return err
			}
			event, data = "", nil
		case strings.HasPrefix(line, ":"): // a comment
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("an event longer than %d bytes", limit)
		}
		return fmt.Errorf("read the stream: %w", err)
	}
	return io.EOF
}
