package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command without printing
// anything more (the command already said what was wrong).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the CLI with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(stderr, "fleetd:", err)
	return 1
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "fleetd",
		Short:         "Run a fleet of coding agents inside herdr and be the MCP gateway they talk through",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(flagErrorExit2)
	root.AddCommand(
		newVersionCmd(),
		newValidateCmd(),
		newMigrateCmd(),
		newJournalCmd(),
		newMCPConfigCmd(),
		newMCPBridgeCmd(),
		newServeCmd(),
		newGetCmd(),
		newDescribeCmd(),
		newApplyCmd(),
		newDeleteCmd(),
		newSendCmd(),
		newUICmd(),
	)
	return root
}

// requireDirArg accepts exactly one argument, the manifests directory; any
// other count is a usage error (exit 2).
func requireDirArg(cmd *cobra.Command, args []string) error {
	if len(args) == 1 {
		return nil
	}
	return usageErrorf(cmd, "want exactly one directory, got %d arguments", len(args))
}

// flagErrorExit2 turns a bad flag into a usage error (exit 2).
func flagErrorExit2(cmd *cobra.Command, err error) error {
	return usageErrorf(cmd, "%v", err)
}

// usageErrorf prints a usage problem with the command's usage line and makes
// the process exit 2.
func usageErrorf(cmd *cobra.Command, format string, args ...any) error {
	fmt.Fprintf(cmd.ErrOrStderr(), "fleetd %s: %s\nUsage: %s\n", cmd.Name(), fmt.Sprintf(format, args...), cmd.UseLine())
	return &exitError{code: 2}
}
