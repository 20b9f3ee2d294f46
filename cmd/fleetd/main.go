// Command fleetd runs and manages a fleet of coding agents inside herdr.
//
// Each subcommand lives in its own file and is registered in newRootCmd;
// a command appears in --help only once it works.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command without printing
// anything more (the command already said what was wrong).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the CLI with args and returns the process exit code.
func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "fleetd:", err)
	return 1
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "fleetd",
		Short:         "Run a fleet of coding agents inside herdr and be the MCP gateway they talk through",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newVersionCmd(),
		newValidateCmd(),
		newMigrateCmd(),
		newMCPConfigCmd(),
		newMCPBridgeCmd(),
	)
	return root
}
