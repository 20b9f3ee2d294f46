// Package journal is the append-only record file behind the messaging core's
// durability: opaque records framed one per line with a checksum, appended in
// batches and fsynced before Append returns, replayed in order on Open, and
// rewritten wholesale (temporary file, fsync, rename, directory fsync) when the
// owner compacts it.
//
// A line is "<crc32c as 8 hex digits> <record>\n". A record must not contain a
// newline (JSON encodes newlines inside strings as \n, so json.Marshal output
// is always safe). A process killed mid-write leaves at most a torn last line:
// Open drops it and truncates the file back to the last whole record. A bad
// line followed by good ones is not a torn write but corruption, and Open
// refuses the file rather than silently losing the records after it.
//
// The package knows nothing of what records mean; it never interprets,
// reorders or drops a record that was acknowledged by Append.
package journal
