package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/cli/manifests"
	"github.com/fleetd-dev/fleetd/internal/cli/printers"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// Every command is a verb written as kubectl writes its commands: an
// options struct that cobra fills from the flags, then
//
//	Complete(cmd, args)  the arguments and the environment ($FLEETD_SERVER,
//	                     $FLEETD_TOKEN, …) into the options; no I/O
//	Validate()           checks the options, parsing those with a syntax
//	                     (-o, -l, --sort-by), and returns the usage error:
//	                     exit 2, the problem on one line and the command's
//	                     usage on the next
//	Run(ctx)             the work, on the options alone (a token file is
//	                     read here, after every usage error)
//
// Options several commands share are one embedded struct each: ioStreams
// (where a command reads and writes), serverOptions (--server, --state-dir
// and the token of the commands that talk to a running fleetd) and
// outputOptions (-o).
type verb interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
	streams() *ioStreams
}

// runVerb is the RunE of every command: v's steps in order.
func runVerb(v verb) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		*v.streams() = ioStreams{in: cmd.InOrStdin(), out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}
		if err := v.Complete(cmd, args); err != nil {
			return err
		}
		if err := v.Validate(); err != nil {
			return usageErrorf(cmd, "%v", err)
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		return v.Run(ctx)
	}
}

// ioStreams are where a command reads and writes: cobra's, so that tests
// capture them.
type ioStreams struct {
	in          io.Reader
	out, errOut io.Writer
}

func (s *ioStreams) streams() *ioStreams { return s }

// fail prints "fleetd VERB: problem" on the error stream, the problem
// safe for a terminal on one line (package termtext), and makes the
// process exit 1.
func (s *ioStreams) fail(verb, format string, args ...any) error {
	fmt.Fprintln(s.errOut, "fleetd "+verb+": "+termtext.Line(fmt.Sprintf(format, args...)))
	return &exitError{code: 1}
}

// readObjects reads the Members, Profiles and Tenants of -f (package
// manifests) for verb, or prints every problem and that nothing was done
// ("nothing was applied") and makes the process exit 1.
func (s *ioStreams) readObjects(files []string, verb, done string) ([]v1alpha1.Object, error) {
	objs, err := manifests.Read(s.in, files, verb)
	if err != nil {
		fmt.Fprintln(s.errOut, err)
		fmt.Fprintf(s.errOut, "fleetd %s: nothing was %s\n", verb, done)
		return nil, &exitError{code: 1}
	}
	return objs, nil
}

// kindName names an object as kubectl does in its output: kind/name, the kind
// in lower case (member/reviewer, profile/claude).
func kindName(obj v1alpha1.Object) string {
	return strings.ToLower(obj.GetObjectKind()) + "/" + obj.GetName()
}

// serverOptions are the options of every command that talks to a running
// fleetd: where it is and the token to talk with.
type serverOptions struct {
	server   string
	stateDir string
	token    string // $FLEETD_TOKEN; else the primary token in stateDir
}

func (o *serverOptions) addFlags(cmd *cobra.Command) { o.addFlagsTo(cmd.Flags()) }

// addFlagsTo adds --server and --state-dir to fs: a command's flags, or
// the persistent flags its subcommands share (rollout's).
func (o *serverOptions) addFlagsTo(fs *pflag.FlagSet) {
	fs.StringVar(&o.server, "server", client.DefaultServer, "base URL of the running fleetd (env FLEETD_SERVER)")
	fs.StringVar(&o.stateDir, "state-dir", defaultStateDir(), "fleetd's state directory, where primary.token is read from")
}

// complete reads the environment: $FLEETD_SERVER unless --server is given,
// and $FLEETD_TOKEN.
func (o *serverOptions) complete(cmd *cobra.Command) {
	fromEnv(cmd, "server", "FLEETD_SERVER", &o.server)
	o.token = os.Getenv("FLEETD_TOKEN")
}

// fromEnv sets *v, flag's value, from the environment variable env when
// that is set and the flag was not given.
func fromEnv(cmd *cobra.Command, flag, env string, v *string) {
	if e := os.Getenv(env); e != "" && !cmd.Flags().Changed(flag) {
		*v = e
	}
}

// client is the client of the running fleetd, as the holder of
// $FLEETD_TOKEN when that is set (inside a worker's pane, say), else as
// the primary, with the token the state directory holds.
func (o *serverOptions) client() (*client.Client, error) {
	token := o.token
	if token == "" {
		b, err := statedir.ReadFile(statedir.At(o.stateDir).PrimaryToken(), statedir.MaxTokenBytes)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("no primary token in %s: start `fleetd serve --state-dir %s` first, or set FLEETD_TOKEN "+
					"(in a fleet on etcd, to the fleet's token: `fleetd token` prints it on the node that minted it, which this node's fleetd log names)", o.stateDir, o.stateDir)
			}
			return nil, fmt.Errorf("read primary token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return client.New(o.server, token), nil
}

// lockStateDir takes the lock of the state directory dir (made absolute),
// for a command that changes what fleetd keeps there: it fails, naming the
// holder, while a fleetd runs on it. The caller unlocks.
func lockStateDir(dir string) (statedir.Layout, *statedir.Lock, error) {
	layout, err := statedir.Abs(dir)
	if err != nil {
		return statedir.Layout{}, nil, err
	}
	lock, err := layout.Lock()
	return layout, lock, err
}

// defaultStateDir is $XDG_STATE_HOME/fleetd, else ~/.local/state/fleetd.
func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "fleetd")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "fleetd")
	}
	return filepath.Join(".", ".fleetd-state")
}

// outputOptions are -o: a command's output format.
type outputOptions struct {
	output  string
	formats []string // the formats the command takes besides the table; nil: all of printers'
	format  printers.Format
}

// addFlags adds -o; formats are the ones the command takes besides its
// table (none: every format printers print).
func (o *outputOptions) addFlags(cmd *cobra.Command, formats ...string) {
	o.formats = formats
	usage := printers.Formats
	if formats != nil {
		usage = orList(formats)
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: "+usage)
}

// validate parses -o.
func (o *outputOptions) validate() error {
	if o.formats != nil && o.output != "" && !slices.Contains(o.formats, o.output) {
		return fmt.Errorf("unknown output format %q; want %s", o.output, orList(o.formats))
	}
	f, err := printers.ParseFormat(o.output)
	if err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	o.format = f
	return nil
}

// orList names words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
