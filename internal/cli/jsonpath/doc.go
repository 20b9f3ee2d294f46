// Package jsonpath is the subset of kubectl's JSONPath templates that
// `fleetd get -o jsonpath=…` prints with and `--sort-by` sorts by
// (k8s.io/client-go/util/jsonpath would bring client-go into the binary for
// a few hundred lines):
//
//	{.metadata.name}                 a field; $ or @ may lead, . alone is the object
//	{.items[0].metadata.name}        an index (negative counts from the end)
//	{.items[*].metadata.name}        every element (of a map: every value, by key)
//	{range .items[*]}…{end}          the body once per element, paths inside relative to it
//	{"\n"}                           a quoted string (Go escapes)
//	text                             copied as it is
//
// Several results of one path are printed separated by spaces, as kubectl
// does; a path that finds nothing prints nothing. Filters ([?()]),
// recursive descent (..), unions and slices are not supported and are
// refused when the template is parsed. A template is at most
// [MaxTemplateBytes].
//
// Templates run on JSON values decoded into any (maps, slices, strings,
// float64s, bools, nil).
//
// It never does: print a value as it came — every value is made safe for a
// terminal (package termtext); only the template's own text, the user's,
// is copied as it is — or read, fetch or sort anything itself.
package jsonpath
