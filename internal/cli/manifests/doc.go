// Package manifests reads the Members that `fleetd apply`, `diff` and
// `delete` are given with -f: files, the manifest files of directories
// (*.yaml and *.yml, not recursive, as fleetd serve lists them) and
// standard input ("-"). A file may hold several documents, and a document
// may be a List — what `fleetd get -o yaml` prints for several members —
// whose items are decoded as documents of their own, their problems
// located at the items' lines. Decoding is api/decode's, strict; status
// and the metadata fleetd owns are ignored.
//
// It never does: return some Members of invalid input (every problem is
// reported and nothing is returned), take anything but Members (Profiles
// and Tenants are the operator's files), read more than [MaxInputBytes]
// of one input, or block on a file that is not a regular one.
package manifests
