package statedb

import (
	"time"

	"github.com/fleetd-dev/fleetd/internal/journal"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// Report is what [Check] found: the journal's report of the file, where a
// record [Open] could not read is damage too.
type Report = journal.Report

// Check reads the database at path without changing it (fleetd may be
// running: a batch being written then looks like a torn tail) and reports
// every damaged line, unfinished batch and unreadable record with its
// offset.
func Check(path string) (Report, error) {
	return journal.Check(path, statedir.MaxStateDBBytes, validRecord)
}

// Repair rewrites the damaged database at path with every intact record,
// in order, after linking (or copying) the original to a backup named
// after now (state.journal.broken-20261201T101500Z), and returns what it
// found and the backup's path. A clean database is left alone (backup "").
// The caller holds the state directory's lock: no fleetd may have it open.
// Records lost to the damage stay lost: a pane whose ownership record is
// lost is closed as an orphan at the next start, and its member started
// afresh.
func Repair(path string, now time.Time) (rep Report, backup string, err error) {
	backup = path + ".broken-" + now.UTC().Format("20060102T150405Z")
	rep, err = journal.Repair(path, backup, statedir.MaxStateDBBytes, validRecord)
	if err != nil {
		return Report{}, "", err
	}
	if len(rep.Damage) == 0 {
		backup = ""
	}
	return rep, backup, nil
}
