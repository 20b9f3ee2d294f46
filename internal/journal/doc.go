// Package journal is the append-only record file behind fleetd's durable
// state — the messaging core's message journal and the state database
// (internal/statedb): opaque records framed one per line with a checksum,
// appended in batches and fsynced before Append returns, replayed in order on
// Open, and rewritten wholesale (temporary file, fsync, rename, directory
// fsync) when the owner compacts it. Open reads the whole file, so it refuses
// one larger than its owner's bound (Options.MaxBytes) before reading a byte.
//
// A Journal is safe for concurrent use, and a rewrite does not stop appends.
// The owner marks the point its snapshot is taken at (BeginRewrite) and hands
// the snapshot to Finish, which writes and fsyncs it to the temporary file
// without the journal's lock while Appends go on in the old file; the journal
// keeps a copy of every batch appended since the mark (at most 64 MiB, or the
// rewrite is abandoned). Then, under its lock, Finish appends those batches to
// the temporary file, fsyncs it, renames it over the journal and fsyncs the
// directory; Appends wait only for that last step. Until the rename the old
// file is the journal and holds every acknowledged batch; after it the new one
// does. A rewrite that fails before the rename removes its temporary file and
// leaves the old one in charge; once renamed, the new file is the journal
// even if the directory fsync fails. An owner that keeps no copy of its
// records reads them again from the file (Records).
//
// The file starts with a header line ("#fleetd-journal 1"; journals written
// before it start with a record and are read too). A line is
// "<crc32c as 8 hex digits><sep><record>\n", where sep is '+' when more
// records of the same batch follow and ' ' on a batch's last record. A record
// must not contain a newline (JSON encodes newlines inside strings as \n, so
// json.Marshal output is always safe).
//
// The journal never lies. A batch is replayed whole or not at all: a process
// killed mid-write leaves at most its unfinished batch and one torn line at
// the end, and Open truncates them away. A write or fsync that fails is cut
// back to the last whole batch before Append returns its error, so the next
// record never follows a torn line; until that cut succeeds, nothing more is
// written. Any other damage (a bad line with more after it, a file that does
// not start with a journal line) is not a torn write but corruption: Open
// refuses the file with ErrCorrupt, naming the byte offset, and leaves it as
// it is. Check lists every damaged line with its offset without changing the
// file; Repair rewrites it with every intact record of every whole batch,
// keeping the original under another name.
//
// The package knows nothing of what records mean; it never interprets,
// reorders or drops a record that was acknowledged by Append.
package journal
