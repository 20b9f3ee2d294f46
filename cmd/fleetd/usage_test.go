package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestUsageErrors_Exit2WithAHint: the mistakes a new user makes are usage
// errors (exit 2), said on one line with a hint on the next, never cobra's
// "unknown command" for a misplaced argument.
func TestUsageErrors_Exit2WithAHint(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"serve given the directory as an argument", []string{"serve", "manifests/"},
			"fleetd serve: unexpected argument \"manifests/\"; serve takes no arguments: a file or directory is given with --manifests\nDid you mean: fleetd serve --manifests manifests/\n"},
		{"apply given the file without -f", []string{"apply", "tester.yaml"},
			"fleetd apply: unexpected argument \"tester.yaml\"; apply takes no arguments: a file or directory is given with -f\nDid you mean: fleetd apply -f tester.yaml\n"},
		{"get with no resource", []string{"get"},
			"fleetd get: missing the resource type (members|profiles|tenants|nodes|events)\nUsage: fleetd get members|profiles|tenants|nodes|events [NAME] [flags]\n"},
		{"describe with no resource", []string{"describe"},
			"fleetd describe: missing the resource type (member|profile|tenant|node)\nUsage: fleetd describe member|profile|tenant|node NAME [flags]\n"},
		{"describe member with no name", []string{"describe", "member"},
			"fleetd describe: missing NAME\nUsage: fleetd describe member|profile|tenant|node NAME [flags]\n"},
		{"describe with too many names", []string{"describe", "member", "a", "b"},
			"fleetd describe: want 2 arguments, got 3\nUsage: fleetd describe member|profile|tenant|node NAME [flags]\n"},
		{"a root flag", []string{"--bogus"},
			"fleetd: unknown flag: --bogus\nUsage: fleetd [flags]\n"},
		{"an unknown command", []string{"frobnicate"},
			"fleetd: unknown command \"frobnicate\"\nRun 'fleetd --help' for the commands.\n"},
		{"a misspelt command", []string{"gte", "members"},
			"fleetd: unknown command \"gte\"\nDid you mean: fleetd get?\n"},
		{"an unknown journal subcommand", []string{"journal", "fix"},
			"fleetd journal: unknown subcommand \"fix\"; want check or repair\nUsage: fleetd journal [flags]\n"},
		{"an argument to a command without any", []string{"version", "x"},
			"fleetd version: unexpected argument \"x\"; version takes no arguments\nUsage: fleetd version [flags]\n"},
		{"a nested command's flag", []string{"journal", "check", "--fix"},
			"fleetd journal check: unknown flag: --fix\nUsage: fleetd journal check [flags]\n"},
		{"completion without a shell", []string{"completion"},
			"fleetd completion: want a subcommand: bash, fish, powershell or zsh\nUsage: fleetd completion [flags]\n"},
		{"completion of an unknown shell", []string{"completion", "tcsh"},
			"fleetd completion: unknown subcommand \"tcsh\"; want bash, fish, powershell or zsh\nUsage: fleetd completion [flags]\n"},
		{"help on an unknown topic", []string{"help", "bogus"},
			"fleetd help: unknown help topic \"bogus\"\nRun 'fleetd --help' for the commands.\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != 2 || stderr != tt.want || stdout != "" {
				t.Errorf("fleetd %s: exit %d, stdout %q, stderr %q; want exit 2, no stdout, stderr %q", strings.Join(tt.args, " "), code, stdout, stderr, tt.want)
			}
		})
	}
}

// TestUsageErrors_EveryCommand walks the whole command tree, the commands
// cobra adds included, so that a command added later is held to the same
// rule: an unknown flag, and more arguments than any command takes, exit 2
// with the command's path, the problem and a one-line hint.
func TestUsageErrors_EveryCommand(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	enforceUsageErrors(root)
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(root, nil)
	if len(paths) < 15 {
		t.Fatalf("walked %d commands; the tree is not what run executes", len(paths))
	}
	extra := strings.Fields(strings.Repeat("x ", 9))
	for _, path := range paths {
		name := strings.Join(append([]string{"fleetd"}, path...), " ")
		t.Run(name, func(t *testing.T) {
			cases := [][]string{append(append([]string(nil), path...), "--no-such-flag")}
			c, _, _ := root.Find(path)
			variadic := strings.Contains(c.Use, "...") // validate DIR|FILE...: any number is a use
			if (len(path) == 0 || path[0] != "help") && !variadic {
				cases = append(cases, append(append([]string(nil), path...), extra...))
			}
			for _, args := range cases {
				code, stdout, stderr := runCLI(t, args...)
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				if code != 2 || stdout != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], name+": ") {
					t.Errorf("fleetd %s: exit %d, stdout %q, stderr %q; want exit 2, no stdout, %q and a hint line",
						strings.Join(args, " "), code, stdout, stderr, name+": <problem>")
				}
			}
		})
	}
}

// TestUsageErrors_FlagRules: cobra checks required flags and flag groups
// after the arguments; their errors are usage errors too.
func TestUsageErrors_FlagRules(t *testing.T) {
	t.Parallel()
	root := &cobra.Command{Use: "fleetd", SilenceUsage: true, SilenceErrors: true}
	sub := &cobra.Command{Use: "thing", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	sub.Flags().String("name", "", "")
	if err := sub.MarkFlagRequired("name"); err != nil {
		t.Fatal(err)
	}
	root.AddCommand(sub)
	var out, errOut bytes.Buffer
	code := runRoot(root, []string{"thing"}, &out, &errOut)
	if want := "fleetd thing: required flag(s) \"name\" not set\nUsage: fleetd thing [flags]\n"; code != 2 || errOut.String() != want {
		t.Errorf("exit %d, stderr %q; want 2, %q", code, errOut.String(), want)
	}
}
