// Package yamledit edits YAML text in place, so that a file a person wrote
// keeps its comments, blank lines, key order and quoting when a program
// changes a few of its values. fleetd edits manifests two ways: `fleetd
// migrate` rewrites a legacy field, and the store (internal/store)
// writes an applied Member into the file that already defines it.
//
// yaml.v3 can parse a file into a [yaml.Node] tree with comments and
// positions, but re-encoding that tree drops blank lines and re-indents and
// re-quotes the whole file. So this package uses the tree only to find what
// to change, and then edits the original bytes at the recorded positions
// ([Source], [Edit]): it replaces a token (padding it, or taking spaces
// before a trailing comment, so that the comment keeps its column where it
// can), inserts lines, or deletes the lines of an entry.
//
// [Update] builds on that: given one document and the data it should hold,
// it edits only the entries that differ and checks its work by parsing the
// result again; whatever it cannot edit faithfully is an error, never a
// silently different file. It knows nothing of fleetd's objects: which
// data a document should hold (defaults left out, fields fleetd owns
// dropped) is the caller's business (package api/encode).
package yamledit
