package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// tokenCheckTimeout bounds the request that checks the token against the
// running fleetd.
const tokenCheckTimeout = 10 * time.Second

// tokenOptions are `fleetd token`'s.
type tokenOptions struct {
	ioStreams
	serverOptions
	show bool
	// serverGiven: --server or $FLEETD_SERVER named the fleetd to check
	// the token against (--show checks only then: a bare token into a
	// pipe needs no word on a default address where nothing runs).
	serverGiven bool
	// terminal reports whether w is a terminal; a test replaces it.
	terminal func(w io.Writer) bool
}

func newTokenCmd() *cobra.Command {
	o := &tokenOptions{terminal: isTerminal}
	cmd := &cobra.Command{
		Use:   "token [--show]",
		Short: "Print the fleet's primary token, to use the fleetd command line on another machine",
		Long: `token prints the primary token in STATE_DIR/primary.token — in a fleet on
etcd, the fleet's one primary token, which the node that minted it keeps —
and how to use it on another machine: the fleetd command line takes it from
FLEETD_TOKEN, a node of the fleet needs no copy of it.

The token is the primary's password at every node's gateway, REST API and
console, so it is printed only to the operator who asked:

  - only by the state directory's owner (the directory and the token file
    must be yours and closed to group and others, as fleetd requires);
  - to a terminal, with what to run on the other machine; into a pipe or a
    file only with --show, which prints the bare token and nothing else
    (for "| ssh HOST 'cat > …'").

It first asks the fleetd at --server whether the token is the one it
accepts, and says so when it is not (a node that joined a fleet keeps the
token it had before, which the fleet does not accept: run fleetd token on
the node that minted the fleet's). fleetd never writes the token to its log.`,
		Example: `  fleetd token
  fleetd token --show | ssh buildbox 'cat > ~/.fleetd-token; chmod 600 ~/.fleetd-token'
  FLEETD_TOKEN=$(cat ~/.fleetd-token) fleetd get members --server http://laptop:8080`,
		Args: cobra.NoArgs,
		RunE: runVerb(o),
	}
	cmd.Flags().BoolVar(&o.show, "show", false, "print the bare token, even into a pipe or a file")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *tokenOptions) Complete(cmd *cobra.Command, _ []string) error {
	fromEnv(cmd, "server", "FLEETD_SERVER", &o.server) // not $FLEETD_TOKEN: the token printed is the file's
	o.serverGiven = cmd.Flags().Changed("server") || os.Getenv("FLEETD_SERVER") != ""
	return nil
}

func (o *tokenOptions) Validate() error { return nil }

// Run prints the token: only from a state directory that is the caller's
// and private, only to a terminal unless --show.
func (o *tokenOptions) Run(ctx context.Context) error {
	state, err := statedir.Abs(o.stateDir)
	if err != nil {
		return o.fail("token", "%v", err)
	}
	if err := state.CheckSafe(); err != nil {
		return o.fail("token", "%v", err)
	}
	tok, err := tokens.ReadPrimaryToken(state.Root())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return o.fail("token", "no primary token in %s: in a fleet on etcd the fleet's token is kept by the node that minted it "+
			"(any node's fleetd log names it): run fleetd token there; here, use it with FLEETD_TOKEN", state.Root())
	case err != nil:
		return o.fail("token", "%v", err)
	}
	if !o.show && !o.terminal(o.out) {
		return o.fail("token", "the output is not a terminal: the token would land in a file or a pipe. "+
			"Give --show to print the bare token there (it is the primary's password: keep what you write it to private)")
	}
	accepted := false
	if !o.show || o.serverGiven {
		accepted = o.check(ctx, tok, state.Root())
	}
	if o.show {
		_, err := fmt.Fprintln(o.out, tok)
		return err
	}
	fmt.Fprintf(o.out, "The primary token in %s (keep it secret: it is the primary's password at every node):\n\n  %s\n\n", state.PrimaryToken(), tok)
	if accepted {
		fmt.Fprintf(o.out, "The fleetd at %s accepts it. ", o.server)
	}
	fmt.Fprintf(o.out, "On another machine, give it to the fleetd command line:\n\n"+
		"  export FLEETD_TOKEN='%s'\n  fleetd get members --server %s\n\n"+
		"or copy it over without printing it: fleetd token --show | ssh HOST 'cat > FILE; chmod 600 FILE'\n", tok, o.server)
	return nil
}

// check asks the fleetd at --server whether it accepts tok, and says on
// the error stream when it does not or cannot tell; it reports whether it
// does.
func (o *tokenOptions) check(ctx context.Context, tok, stateDir string) bool {
	ctx, cancel := context.WithTimeout(ctx, tokenCheckTimeout)
	defer cancel()
	var list struct{}
	err := client.New(o.server, tok).Get(ctx, "/members", &list)
	var he *client.HTTPError
	switch {
	case err == nil:
		return true
	case errors.As(err, &he) && he.Status == http.StatusUnauthorized:
		fmt.Fprintf(o.errOut, "fleetd token: the fleetd at %s refuses the token in %s: it is not the token of that fleetd's fleet "+
			"(in a fleet on etcd, run fleetd token on the node that minted the fleet's; any node's fleetd log names it)\n", o.server, stateDir)
	default:
		fmt.Fprintf(o.errOut, "fleetd token: could not check the token against the fleetd at %s: %v\n", o.server, err)
	}
	return false
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
