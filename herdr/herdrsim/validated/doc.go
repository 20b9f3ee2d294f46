// Package validated starts the fake herdr of package herdrsim with every
// request checked against herdr's own JSON Schema (herdr/internal/schemacheck),
// so that a client that sends something real herdr would refuse fails its
// test. It is for tests (and test tools such as cmd/herdr-sim and the bench
// runner) only: the fleetd binary must not import it, because it links a
// JSON Schema validator; the architecture test (internal/archtest) checks
// that. Call sites stay one line: validated.Start(opts) where a test would
// call herdrsim.Start(opts), and validated.Schema() where a fake is started
// by someone else (fleetd's daemon in sim mode) and only takes a
// herdrsim.Validator.
package validated
