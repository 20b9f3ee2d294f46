// Package encode writes fleetd objects back as the YAML a person would
// have written: the inverse of package api/decode, for the places where
// fleetd itself writes or shows a definition — the store writing an
// applied Member into the manifests directory, and `fleetd diff` showing
// the desired object against the live one.
//
// [Node] is an object's definition with what fleetd owns dropped (status,
// metadata.uid, metadata.generation, metadata.creationTimestamp — the
// fields [decode.FleetdOwned] names) and keys in the order of the Go types
// (apiVersion, kind, metadata, spec). [Minimal] goes further: it leaves out
// every field whose absence decodes to the same object — the defaults
// (transport: streamable-http, mcpTarget: {kind: resident}, …) — unless the
// existing definition it is given already spells that field out, and it
// keeps the existing spelling of a value that decodes the same (a
// startupTimeout of 60s is not rewritten as 1m0s). No list of defaults is
// kept here: whether a field matters is decided by decoding the definition
// with and without it, with the same decoder fleetd serve uses, so the
// answer cannot drift from what SetDefaults does.
//
// A definition Minimal returns always decodes to an object equal to the
// one given (compared as [Node] renders them); the store checks that again
// before it writes.
package encode
