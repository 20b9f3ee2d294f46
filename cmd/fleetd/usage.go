package main

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// exitError carries a process exit code out of a command without printing
// anything more (the command already said what was wrong).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageErrorf prints a usage problem, one line naming the command, then
// one line of hint (the command's usage line), and makes the process exit 2.
func usageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return usageHint(cmd, fmt.Sprintf(format, args...), "Usage: "+cmd.UseLine())
}

// usageHint prints problem and hint on a line each and makes the process
// exit 2. The command is named by its whole path ("fleetd journal check"),
// the root by "fleetd" alone.
func usageHint(cmd *cobra.Command, problem, hint string) error {
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n%s\n", cmd.CommandPath(), problem, hint)
	return &exitError{code: 2}
}

// flagErrorExit2 turns a bad flag into a usage error (exit 2). An unknown
// flag that is a typo of one of cmd's (`--sever`) gets the flag meant as
// its hint, the way an unknown command does.
func flagErrorExit2(cmd *cobra.Command, err error) error {
	if m := unknownFlag.FindStringSubmatch(err.Error()); m != nil {
		if meant := flagsMeant(cmd, m[1]); len(meant) > 0 {
			return usageHint(cmd, err.Error(), "Did you mean "+orList(meant)+"?")
		}
	}
	return usageErrorf(cmd, "%v", err)
}

// unknownFlag matches pflag's error for an unknown long flag.
var unknownFlag = regexp.MustCompile(`^unknown flag: --([^=\s]+)`)

// flagsMeant are the flags of cmd (its own and those it inherits) that
// typed is most likely a typo of: those at the smallest edit distance, at
// most 2 (as cobra suggests commands), or that typed is a prefix of.
func flagsMeant(cmd *cobra.Command, typed string) []string {
	best := 3
	var meant []string
	consider := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(strings.ToLower(typed), f.Name)
		if d > 2 && strings.HasPrefix(f.Name, typed) {
			d = 2
		}
		switch {
		case d < best:
			best, meant = d, []string{"--" + f.Name}
		case d == best && !slices.Contains(meant, "--"+f.Name):
			meant = append(meant, "--"+f.Name)
		}
	}
	cmd.Flags().VisitAll(consider)
	cmd.InheritedFlags().VisitAll(consider)
	return meant
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// requireDirArg accepts exactly one argument, the manifests directory; any
// other count is a usage error (exit 2).
func requireDirArg(cmd *cobra.Command, args []string) error {
	if len(args) == 1 {
		return nil
	}
	return usageErrorf(cmd, "want exactly one directory, got %d arguments", len(args))
}

// pathFlags are the flags a stray positional argument most likely belongs
// to: `fleetd serve manifests/` means --manifests, `fleetd apply x.yaml`
// means -f.
var pathFlags = []string{"manifests", "filename"}

// enforceUsageErrors makes every usage error of root's tree exit 2 with a
// one-line problem and a one-line hint, whatever validator a command uses:
// cobra's own argument checks (cobra.NoArgs, cobra.ExactArgs, ...) return
// plain errors that would otherwise exit 1 with cobra's wording. It also
// covers what cobra adds itself (help, completion), so it must run on the
// finished tree, before Execute. An unknown command fails in cobra's lookup,
// before any check: runRoot turns that error into unknownCommand's.
func enforceUsageErrors(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.SuggestionsMinimumDistance = 2
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" {
				helpUsage(sub)
			} else {
				wrapArgs(sub)
			}
			if !sub.Runnable() && sub.HasSubCommands() {
				sub.RunE = wantSubcommand
			}
			walk(sub)
		}
	}
	walk(root)
}

// unknownCommand is the usage error for `fleetd NAME` when NAME is no
// command, or nil when err (from executing root) is not that error.
func unknownCommand(root *cobra.Command, err error) error {
	m := cobraUnknownRoot.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	name, _ := strconv.Unquote(m[1])
	hint := "Run 'fleetd --help' for the commands."
	if s := root.SuggestionsFor(name); len(s) > 0 {
		hint = "Did you mean: fleetd " + strings.Join(s, ", fleetd ") + "?"
	}
	return usageHint(root, fmt.Sprintf("unknown command %s", m[1]), hint)
}

// wrapArgs makes c's argument check a usage error (exit 2) in fleetd's
// words. A command without a check takes no arguments.
func wrapArgs(c *cobra.Command) {
	check := c.Args
	if check == nil && !c.HasSubCommands() {
		check = cobra.NoArgs
	}
	if check == nil {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		var ee *exitError
		if err == nil || errors.As(err, &ee) {
			return err
		}
		return argsError(cmd, args, err)
	}
}

var (
	// flagRuleError matches cobra's errors for MarkFlagRequired and the
	// flag groups, which it checks after the arguments.
	flagRuleError   = regexp.MustCompile(`^(required flag\(s\) |if any flags in the group |at least one of the flags in the group |none of the others can be)`)
	cobraUnexpected = regexp.MustCompile(`^unknown command (".*") for `)
	// cobraUnknownRoot is cobra's lookup error for an unknown command.
	cobraUnknownRoot = regexp.MustCompile(`^unknown command (".*") for "fleetd"`)
	cobraArgCount    = regexp.MustCompile(`^(?:accepts (\d+)|accepts between (\d+) and (\d+)|requires at least (\d+)|accepts at most (\d+)) arg\(s\), (?:only )?received (\d+)$`)
)

// argsError rewrites one of cobra's argument errors as a usage error.
func argsError(cmd *cobra.Command, args []string, err error) error {
	if m := cobraUnexpected.FindStringSubmatch(err.Error()); m != nil {
		arg := args[0]
		if cmd.HasSubCommands() {
			return usageErrorf(cmd, "unknown subcommand %s; want %s", m[1], subcommandNames(cmd))
		}
		for _, name := range pathFlags {
			if f := cmd.Flags().Lookup(name); f != nil && len(args) == 1 {
				flag := "--" + f.Name
				if f.Shorthand != "" {
					flag = "-" + f.Shorthand
				}
				return usageHint(cmd, fmt.Sprintf("unexpected argument %q; %s takes no arguments: a file or directory is given with %s", arg, cmd.Name(), flag),
					fmt.Sprintf("Did you mean: %s %s %s", cmd.CommandPath(), flag, arg))
			}
		}
		return usageErrorf(cmd, "unexpected argument %q; %s takes no arguments", arg, cmd.Name())
	}
	if m := cobraArgCount.FindStringSubmatch(err.Error()); m != nil {
		if missing := missingArg(cmd, len(args)); missing != "" {
			return usageErrorf(cmd, "%s", missing)
		}
		got := m[6]
		switch {
		case m[1] != "":
			return usageErrorf(cmd, "want %s arguments, got %s", m[1], got)
		case m[2] != "":
			return usageErrorf(cmd, "want %s to %s arguments, got %s", m[2], m[3], got)
		case m[4] != "":
			return usageErrorf(cmd, "want at least %s arguments, got %s", m[4], got)
		default:
			return usageErrorf(cmd, "want at most %s arguments, got %s", m[5], got)
		}
	}
	return usageErrorf(cmd, "%v", err)
}

// missingArg names the first required argument of cmd's usage line ("get
// members [NAME]", "describe member NAME") that n arguments do not reach,
// or "" when n reaches them all.
func missingArg(cmd *cobra.Command, n int) string {
	var required []string
	for _, f := range strings.Fields(cmd.Use)[1:] {
		if strings.HasPrefix(f, "[") || strings.HasPrefix(f, "-") {
			break
		}
		required = append(required, f)
	}
	if n >= len(required) {
		return ""
	}
	want := required[n]
	if strings.ToUpper(want) == want {
		return "missing " + want
	}
	return "missing the resource type (" + want + ")"
}

// wantSubcommand runs a command that only groups others (completion): with
// no argument, or an unknown one, it is a usage error.
func wantSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usageErrorf(cmd, "want a subcommand: %s", subcommandNames(cmd))
	}
	return usageErrorf(cmd, "unknown subcommand %q; want %s", args[0], subcommandNames(cmd))
}

func subcommandNames(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return orList(names)
}

// helpUsage makes `fleetd help TOPIC` for an unknown topic a usage error
// (cobra prints the root's usage and exits 0).
func helpUsage(help *cobra.Command) {
	show := help.Run
	help.Run = nil
	help.RunE = func(cmd *cobra.Command, args []string) error {
		if found, _, err := cmd.Root().Find(args); err != nil || found == nil || (found == cmd.Root() && len(args) > 0) {
			return usageHint(cmd, fmt.Sprintf("unknown help topic %q", strings.Join(args, " ")), "Run 'fleetd --help' for the commands.")
		}
		show(cmd, args)
		return nil
	}
}
