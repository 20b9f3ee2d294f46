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
	"github.com/fleetd-dev/fleetd/internal/statedb"
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
		Short: "Check or repair the message journal and the state database in the state directory",
		Long: `fleetd keeps two journals in its state directory: the message journal
(STATE_DIR/messages/messaging.journal: queued messages, mailboxes, open turns)
and the state database (STATE_DIR/state.journal: the panes it runs for its
members, their tokens' hashes, what it keeps of each member). fleetd drops the
end of a write a crash cut short by itself; any other damage stops
` + "`fleetd serve`" + ` rather than losing what they hold. check lists it; repair
keeps every intact record and sets the original aside.`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&stateDir, "state-dir", defaultStateDir(), "fleetd's state directory")
	cmd.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "Report every damaged record of the message journal and the state database with its byte offset (exit 1 if any)",
		Long: `check reads both journals without changing them (fleetd may be running) and
prints each damaged line or unfinished batch with its byte offset. It exits 0
when both are clean and 1 when it found damage or could not read a file.`,
		Args: cobra.NoArgs,
		RunE: runVerb(&journalOptions{stateDir: &stateDir}),
	}, &cobra.Command{
		Use:   "repair",
		Short: "Rewrite a damaged message journal or state database with every intact record, keeping the original as a backup",
		Long: `repair takes the state directory's lock (so fleetd must be stopped), keeps
every intact record of each damaged journal in order, links the original to
NAME.broken-TIME beside it and replaces the journal atomically. A clean
journal is left alone.`,
		Args: cobra.NoArgs,
		RunE: runVerb(&journalOptions{stateDir: &stateDir, repair: true}),
	})
	return cmd
}

func (o *journalOptions) Complete(*cobra.Command, []string) error { return nil }
func (o *journalOptions) Validate() error                         { return nil }

// journalFile is one journal of the state directory and how it is checked
// and repaired.
type journalFile struct {
	path   string
	check  func() (messaging.JournalReport, error)
	repair func(now time.Time) (messaging.JournalReport, string, error)
}

// journals are the state directory's journals that exist: the message
// journal and the state database.
func journals(stateDir string) ([]journalFile, error) {
	layout, err := statedir.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	dir, db := layout.Messages(), layout.StateDB()
	all := []journalFile{
		{path: messaging.JournalPath(dir),
			check:  func() (messaging.JournalReport, error) { return messaging.CheckJournal(dir) },
			repair: func(now time.Time) (messaging.JournalReport, string, error) { return messaging.RepairJournal(dir, now) }},
		{path: db,
			check: func() (messaging.JournalReport, error) {
				rep, err := statedb.Check(db)
				return messaging.JournalReport(rep), err
			},
			repair: func(now time.Time) (messaging.JournalReport, string, error) {
				rep, backup, err := statedb.Repair(db, now)
				return messaging.JournalReport(rep), backup, err
			}},
	}
	var found []journalFile
	for _, j := range all {
		if _, err := os.Lstat(j.path); !errors.Is(err, fs.ErrNotExist) {
			found = append(found, j)
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no message journal at %s and no state database at %s (is --state-dir right?)", all[0].path, all[1].path)
	}
	return found, nil
}

func (o *journalOptions) Run(context.Context) error {
	files, err := journals(*o.stateDir)
	if err != nil {
		return err
	}
	if o.repair {
		return o.runRepair(files)
	}
	damaged := false
	for _, j := range files {
		rep, err := j.check()
		if err != nil {
			return err
		}
		o.printReport(rep)
		damaged = damaged || len(rep.Damage) > 0
	}
	if damaged {
		return &exitError{code: 1}
	}
	return nil
}

// runRepair repairs the journals under the state directory's lock.
func (o *journalOptions) runRepair(files []journalFile) error {
	_, lock, err := lockStateDir(*o.stateDir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	for _, j := range files {
		rep, backup, err := j.repair(time.Now())
		if err != nil {
			return err
		}
		if backup == "" {
			fmt.Fprintf(o.out, "%s: %d intact records, no damage; nothing to repair\n", rep.Path, rep.Records)
			continue
		}
		o.printReport(rep)
		fmt.Fprintf(o.out, "repaired: %s now holds the %d intact records; the original is %s\n", rep.Path, rep.Records, backup)
	}
	return nil
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
