// Package printers prints what the fleetd CLI reads from a running fleetd,
// the way kubectl prints: the tables of `fleetd get` (and -o wide), the
// other output formats (-o yaml, json, name, jsonpath=…, go-template=…),
// the watch table of `get -w` whose change lines line up under it,
// the members' events of `get events` (and -w), `fleetd describe`'s pages
// (a profile's with its rollout and revisions), `fleetd rollout`'s status
// lines, history and revisions (rollout.go, kubectl rollout's wording), the
// inbox table and the held prune of `fleetd prune`.
//
// A [Format] is a parsed -o; a [Printer] prints the objects of one kind in
// one format; [MemberStream] prints a member watch as it arrives, and
// [EventStream] the events. Lists
// print as kubectl's List (members, which `fleetd apply -f` takes back) or
// as KINDList (as GET /profiles and /tenants send them).
//
// Describe is driven by lists of fields, one per line: a field of a spec
// or status is shown by adding its line to the kind's list, and a test
// fails when a field of api/v1alpha1's types is in none
// (TestDescribe_ShowsEveryField).
//
// Everything printed that someone else wrote — names, labels, statuses,
// the agents' own reports, the server's messages — is made safe for a
// terminal (package termtext): a table cell or describe value on one line,
// template output as text, JSON and YAML with what a terminal obeys
// escaped.
//
// It never does: fetch, filter or watch anything (the client and the
// commands do), or print a value someone else wrote as it came.
package printers
