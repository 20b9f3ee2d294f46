package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

func newJournalCmd() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "journal",
		Short: "Check or repair the message journal in the state directory",
		Long: `The message journal (STATE_DIR/messages/messaging.journal) holds queued
messages, mailboxes and open turns. fleetd drops the end of a write a crash
cut short by itself; any other damage stops ` + "`fleetd serve`" + ` rather than
losing what the journal holds. check lists it; repair keeps every intact
record and sets the original aside.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf(cmd, "want a subcommand: check or repair")
		},
	}
	cmd.PersistentFlags().StringVar(&stateDir, "state-dir", fleetdStateDir(), "fleetd's state directory")

	check := &cobra.Command{
		Use:   "check",
		Short: "Report every damaged record of the message journal with its byte offset (exit 1 if any)",
		Long: `check reads the journal without changing it (fleetd may be running) and
prints each damaged line or unfinished batch with its byte offset. It exits 0
for a clean journal and 1 when it found damage or could not read the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := journalDir(stateDir)
			if err != nil {
				return err
			}
			rep, err := messaging.CheckJournal(dir)
			if err != nil {
				return err
			}
			printJournalReport(cmd.OutOrStdout(), rep)
			if len(rep.Damage) > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	repair := &cobra.Command{
		Use:   "repair",
		Short: "Rewrite a damaged message journal with every intact record, keeping the original as a backup",
		Long: `repair takes the state directory's lock (so fleetd must be stopped), keeps
every intact record of the journal in order, links the original to
messaging.journal.broken-TIME beside it and replaces the journal atomically.
A clean journal is left alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := journalDir(stateDir)
			if err != nil {
				return err
			}
			layout, err := statedir.Abs(stateDir)
			if err != nil {
				return err
			}
			lock, err := layout.Lock()
			if err != nil {
				return err
			}
			defer lock.Unlock()
			rep, backup, err := messaging.RepairJournal(dir, time.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if backup == "" {
				fmt.Fprintf(out, "%s: %d intact records, no damage; nothing to repair\n", rep.Path, rep.Records)
				return nil
			}
			printJournalReport(out, rep)
			fmt.Fprintf(out, "repaired: %s now holds the %d intact records; the original is %s\n", rep.Path, rep.Records, backup)
			return nil
		},
	}
	cmd.AddCommand(check, repair)
	return cmd
}

// journalDir is the messaging directory of stateDir, which must hold a
// journal.
func journalDir(stateDir string) (string, error) {
	layout, err := statedir.Abs(stateDir)
	if err != nil {
		return "", err
	}
	dir := layout.Messages()
	if _, err := os.Stat(messaging.JournalPath(dir)); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no message journal at %s (is --state-dir right?)", messaging.JournalPath(dir))
	}
	return dir, nil
}

func printJournalReport(out io.Writer, rep messaging.JournalReport) {
	fmt.Fprintf(out, "%s: %d bytes, %d intact records, %d damaged\n", rep.Path, rep.Size, rep.Records, len(rep.Damage))
	for _, d := range rep.Damage {
		fmt.Fprintf(out, "  byte %d (line %d, %d bytes): %s\n", d.Offset, d.Line, d.Bytes, d.Reason)
	}
	switch {
	case len(rep.Damage) == 0:
	case rep.Refused:
		fmt.Fprintf(out, "fleetd serve refuses this journal; `fleetd journal repair` keeps the %d intact records and sets the original aside\n", rep.Records)
	default:
		fmt.Fprintln(out, "a write cut short by a crash: fleetd serve drops it at start (it was never acknowledged)")
	}
}
