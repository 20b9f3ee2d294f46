// Package schemacheck validates herdr socket-API lines against herdr's own
// JSON Schema, one per protocol: 20 (herdr 0.8.x) and 22 (herdr 0.9.x).
//
// The schema files in this directory are unmodified copies of herdr's
// docs/next/api/herdr-api.schema.json from the public repository
// herdrdev/herdr (formerly ogulcancelik/herdr), licensed Apache-2.0:
// herdr-api.schema.json from herdr 0.8.2 (protocol 20, schema_version 1) and
// herdr-api.p22.schema.json from herdr 0.9.3 (protocol 22, schema_version 1).
// They are embedded in the binary, so validation needs no files at run time.
// herdr keeps that file current with its own test (src/api/schema/tests.rs),
// which makes it the authoritative wire contract; when a schema changes
// upstream, replace the copy here (each file's "protocol" member is checked
// against the protocol it is loaded for). [New] and [Shared] take the
// protocol; [Protocols] lists the embedded ones. The files stay as herdr
// wrote them; [New] compiles each with its tagged unions (serde enums, a
// oneOf per enum) dispatched on their tag, which accepts exactly what the
// oneOfs accept at a fraction of the cost (tagged.go).
//
// The document has five top-level schemas under "schemas": request,
// success_response, error_response, event (snake_case lifecycle event lines,
// data carrying a "type" tag) and subscription_event (dot-named per-pane
// lines such as "pane.agent_status_changed", data untagged). Each has a
// method on [Validator]. A line is validated as JSON exactly as it appears on
// the wire; numbers keep their full precision.
//
// The schema does not forbid unknown fields (herdr ignores them), so a line
// fails only for a missing required field, a wrong type, an unknown enum
// value or tag, or an unmatched oneOf branch. This package only checks
// shapes: it must never be used to make protocol decisions at run time, and it
// never changes, repairs or normalizes a line.
package schemacheck
