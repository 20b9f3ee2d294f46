package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// journalOptions are `fleetd journal check` and `fleetd journal repair`'s.
type journalOptions struct {
	ioStreams
	stateDir *string // journal's --state-dir
	repair   bool    // repair the journal; else check it
}

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
	}
	cmd.PersistentFlags().StringVar(&stateDir, "state-dir", defaultStateDir(), "fleetd's state directory")
	cmd.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "Report every damaged record of the message journal with its byte offset (exit 1 if any)",
		Long: `check reads the journal without changing it (fleetd may be running) and
prints each damaged line or unfinished batch with its byte offset. It exits 0
for a clean journal and 1 when it found damage or could not read the file.`,
		Args: cobra.NoArgs,
		RunE: runVerb(&journalOptions{stateDir: &stateDir}),
	}, &cobra.Command{
		Use:   "repair",
		Short: "Rewrite a damaged message journal with every intact record, keeping the original as a backup",
		Long: `repair takes the state directory's lock (so fleetd must be stopped), keeps
every intact record of the journal in order, links the original to
messaging.journal.broken-TIME beside it and replaces the journal atomically.
A clean journal is left alone.`,
		Args: cobra.NoArgs,
		RunE: runVerb(&journalOptions{stateDir: &stateDir, repair: true}),
	})
	return cmd
}

func (o *journalOptions) Complete(*cobra.Command, []string) error { return nil }
func (o *journalOptions) Validate() error                         { return nil }

func (o *journalOptions) Run(context.Context) error {
	dir, err := journalDir(*o.stateDir)
	if err != nil {
		return err
	}
	if o.repair {
		return o.runRepair(dir)
	}
	rep, err := messaging.CheckJournal(dir)
	if err != nil {
		return err
	}
	o.printReport(rep)
	if len(rep.Damage) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// runRepair repairs the journal in dir under the state directory's lock.
func (o *journalOptions) runRepair(dir string) error {
	_, lock, err := lockStateDir(*o.stateDir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	rep, backup, err := messaging.RepairJournal(dir, time.Now())
	if err != nil {
		return err
	}
	if backup == "" {
		fmt.Fprintf(o.out, "%s: %d intact records, no damage; nothing to repair\n", rep.Path, rep.Records)
		return nil
	}
	o.printReport(rep)
	fmt.Fprintf(o.out, "repaired: %s now holds the %d intact records; the original is %s\n", rep.Path, rep.Records, backup)
	return nil
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

func (o *journalOptions) printReport(rep messaging.JournalReport) {
	fmt.Fprintf(o.out, "%s: %d bytes, %d intact records, %d damaged\n", rep.Path, rep.Size, rep.Records, len(rep.Damage))
	for _, d := range rep.Damage {
		fmt.Fprintf(o.out, "  byte %d (line %d, %d bytes): %s\n", d.Offset, d.Line, d.Bytes, d.Reason)
	}
	switch {
	case len(rep.Damage) == 0:
	case rep.Refused:
		fmt.Fprintf(o.out, "fleetd serve refuses this journal; `fleetd journal repair` keeps the %d intact records and sets the original aside\n", rep.Records)
	default:
		fmt.Fprintln(o.out, "a write cut short by a crash: fleetd serve drops it at start (it was never acknowledged)")
	}
}
