// Package manifests reads the objects that `fleetd apply`, `diff` and
// `delete` are given with -f — Members, Profiles and Tenants: files, the
// manifest files of directories (*.yaml and *.yml, not recursive, as
// fleetd serve lists them) and standard input ("-"). A file may hold
// several documents of any of the kinds, and a document may be a List —
// what `fleetd get -o yaml` prints for several objects — whose items are
// decoded as documents of their own, their problems located at the items'
// lines. Decoding is api/decode's, strict; status and the metadata fleetd
// owns are ignored. [ForApply] and [ForDelete] put the objects in the
// order the commands send them: what a Member references before it on
// apply, after it on delete.
//
// It never does: return some objects of invalid input (every problem is
// reported and nothing is returned), read more than [MaxInputBytes] of one
// input, or block on a file that is not a regular one.
package manifests
