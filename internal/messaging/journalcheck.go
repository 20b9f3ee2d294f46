package messaging

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fleetd-dev/fleetd/internal/journal"
)

// ErrJournalCorrupt is wrapped by [New]'s error when the journal is damaged
// in a way a crash cannot explain. New then leaves the file as it is:
// [CheckJournal] lists the damage and [RepairJournal] keeps every intact
// record.
var ErrJournalCorrupt = journal.ErrCorrupt

// JournalDamage is one damaged stretch of a journal: its byte offset, line,
// length and what is wrong. Torn damage (the end of a write a crash cut
// short) is dropped by New; any other makes New refuse the journal.
type JournalDamage = journal.Damage

// JournalReport is what [CheckJournal] found.
type JournalReport struct {
	Path    string
	Size    int64
	Records int // intact records New would replay, or Repair would keep
	Damage  []JournalDamage
	// Refused: New refuses this journal until it is repaired.
	Refused bool
}

// JournalPath is the journal's path in the messaging directory dir (the
// directory given to [New]).
func JournalPath(dir string) string { return filepath.Join(dir, JournalFile) }

// CheckJournal reads the journal in dir without changing it and reports
// every damaged or unreplayable record with its offset. It may run while
// fleetd runs (it then may see a write in progress as a torn tail).
func CheckJournal(dir string) (JournalReport, error) {
	r, err := journal.Check(JournalPath(dir), 0, validRecord)
	return JournalReport(r), err
}

// RepairJournal rewrites the damaged journal in dir with every intact
// record it holds, after linking (or copying) the original to a backup
// named after now (messaging.journal.broken-20261201T101500Z), and returns
// what it found and the backup's path. A clean journal is left alone
// (backup ""). The caller holds the state directory's lock: no Core may
// have the journal open.
func RepairJournal(dir string, now time.Time) (rep JournalReport, backup string, err error) {
	path := JournalPath(dir)
	backup = path + ".broken-" + now.UTC().Format("20060102T150405Z")
	r, err := journal.Repair(path, backup, 0, validRecord)
	if err != nil {
		return JournalReport{}, "", err
	}
	if len(r.Damage) == 0 {
		backup = ""
	}
	return JournalReport(r), backup, nil
}

// validRecord is decodeRecord as the journal's check of one record.
func validRecord(raw []byte) error {
	_, err := decodeRecord(raw)
	return err
}

// decodeRecord is New's reading of one record: JSON of a known operation.
func decodeRecord(raw []byte) (record, error) {
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, err
	}
	if _, ok := knownOps[r.Op]; !ok {
		return r, fmt.Errorf("unknown operation %q", r.Op)
	}
	return r, nil
}
