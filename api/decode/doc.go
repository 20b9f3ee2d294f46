// Package decode reads fleetd manifests: files of one or more YAML
// documents, each one Member, Profile or Tenant of apiVersion
// fleetd.dev/v1alpha1.
//
// Decoding is strict and fail-closed. Every problem is an [Error] that
// names the file, the 1-based line and the field path
// (`members/reviewer.yaml:7: spec.transport: unknown value "http"; want
// stdio or streamable-http`), and every problem in a file is reported, not
// just the first: YAML syntax errors (one per document, since a document
// that does not parse has nothing more to say), duplicate keys, unknown
// fields, wrong types, bad enum values, missing required fields and
// everything [v1alpha1] validation rejects. Objects are returned only from
// documents without errors, defaulted and validated.
//
// How it works: each document is parsed with go.yaml.in/yaml/v3 into a
// node tree, which keeps lines. The tree is walked against the Go type by
// reflection over its JSON tags, so that all unknown fields and type
// errors are found with their lines in one pass; the fields that pass are
// set in the typed object, as encoding/json would decode them, and the
// object is then defaulted and validated. Validation errors carry field
// paths, mapped back to the lines the walk recorded.
//
// Two shapes get a dedicated message. A Member spec is closed: a key that
// names a URL, credential, token, header, command, argv or environment, at
// any depth, is rejected with a pointer to where it belongs (Profile or
// Tenant) — the words are v1alpha1's one list ([v1alpha1.ClassifyKey]),
// which the spawn guard shares; [CheckClosedMemberSpec] applies the same rule to specs that
// arrive as JSON over MCP or REST. A Member carrying the legacy
// spec.mcpTransport is rejected with an error naming `fleetd migrate`;
// this package never rewrites it — that is package migrate's job.
//
// Across objects: [Manifest] keeps where each object is written, and the
// fields these checks place their errors on ([FileResult.Line]), so the
// checks that span files locate their errors without parsing again.
// [CheckDuplicates] reports a kind and name defined twice (on the later
// definition, naming the earlier one's line; neither is used),
// [CheckReferences] a Member whose Profile or Tenant is not defined, and
// [CheckWorktrees] a Member whose worktree branch (its own, or its
// profile's) another Member claims first. `fleetd validate` and the
// desired-state store use them, so a problem reads the same before fleetd
// runs and while it does.
//
// Fields fleetd owns — status, metadata.uid, metadata.generation and
// metadata.creationTimestamp — are accepted and dropped, so that the output
// of `fleetd get -o yaml` can be applied again.
//
// Which files are read, and how much of them, is one rule here too:
// [ReadManifest] reads a regular file (or a link to one) of at most a
// limit ([DefaultMaxManifestBytes] unless the operator sets another),
// never blocks on what it opens, and says what a refused file is — a
// named pipe, a directory, a link to /dev/zero, a file over the limit.
// [Dir] (and so `fleetd validate`) and the store's watcher both read with
// it, so they skip the same files with the same errors.
//
// This package reads bytes and directories; it never writes a file, never
// talks to herdr or the network, and never reads the environment (a
// Tenant's credentialEnv is a name, never looked up here).
package decode
