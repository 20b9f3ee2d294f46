// Package migrate is the one-shot migration of Member manifests from the
// legacy spec.mcpTransport shape to spec.mcpTarget + spec.transport
// (DESIGN §2.4). It backs `fleetd migrate DIR [--dry-run]`.
//
// The legacy shape conflated two questions in one field: which gateway a
// member talks to and how bytes travel there. Its remote mode becomes
//
//	mcpTarget: {kind: tenant, tenantId: X}
//	transport: streamable-http
//
// and its resident mode (or a missing mode) becomes nothing at all:
// spec.mcpTransport is dropped and mcpTarget stays absent, which already
// means resident. spec.transport is left as written: the legacy resident
// entry said nothing about transport, so there is nothing to carry over,
// and an absent transport keeps meaning streamable-http.
//
// # How files are rewritten
//
// Files are edited in place with package internal/yamledit: the parsed
// tree only says what to change, and the original bytes are edited at the
// recorded positions — legacy tokens renamed (padded so that a trailing
// comment keeps its column), one line inserted, or the lines of the legacy
// entry deleted. Everything else — comments, key order, blank lines,
// quoting, other documents — stays byte for byte. Before anything is
// written, the edited text is parsed again and compared with the expected
// tree (the original tree with the migration applied to it); any
// difference is an error and the file is left alone.
//
// Only documents of kind Member are touched. A legacy entry the migration
// cannot rewrite faithfully (an unknown mode, a tenant without tenantId, a
// member that already has mcpTarget, anchors, unknown legacy fields) is a
// [decode.Error] naming file, line and field, the same shape fleetd
// validate prints; when any file has one, [Dir] writes nothing at all, so
// an operator fixes it and reruns. Files are replaced atomically
// (temporary file in the same directory, fsync, rename) with their
// original mode. A second run finds nothing to do.
//
// The package never touches anything but the legacy field and the
// transport line it adds, never reads outside the directory it is given
// (no recursion), and is meant to be deleted once no legacy manifests
// remain: this directory (its testdata/legacy holds the legacy example the
// docs point at), cmd/fleetd/migrate.go with its test, and the command's
// line in cmd/fleetd/main.go — nothing else. Only cmd/fleetd may import
// it (internal/archtest's graph says so).
package migrate
