package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the CLI with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runRoot(newRootCmd(), args, stdout, stderr)
}

// runRoot executes root's tree with args: a usage error of any command
// (enforceUsageErrors) exits 2, another failure 1.
func runRoot(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	enforceUsageErrors(root) // after SetOut: cobra's completion command keeps the writer it finds
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if cmd != nil && flagRuleError.MatchString(err.Error()) {
		err = usageErrorf(cmd, "%v", err)
	}
	if cmd == root {
		if uerr := unknownCommand(root, err); uerr != nil {
			err = uerr
		}
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
		newTokenCmd(),
		newServeCmd(),
		newGetCmd(),
		newDescribeCmd(),
		newApplyCmd(),
		newDeleteCmd(),
		newDiffCmd(),
		newSendCmd(),
		newLogsCmd(),
		newInboxCmd(),
		newPruneCmd(),
		newStoreCmd(),
		newUICmd(),
		newRolloutCmd(),
		newFenceWatchdogCmd(),
	)
	return root
}
