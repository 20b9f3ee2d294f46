// Package fencewatch keeps a fleet node's fence deadline in a process of
// its own: the watchdog, which closes (or pauses) the node's panes at the
// deadline when the fleetd that armed it does not run to do it itself.
//
// A node's fence (package fleet) closes the panes of the members another
// node may take over before that node may start them. It runs in fleetd:
// a fleetd stopped with SIGSTOP, held in a debugger or hung closes
// nothing, while its herdr and agents run on, and another node starts the
// same members once the scheduler's grace ends — two live agents for one
// member. `fleetd serve --store etcd` therefore starts `fleetd
// fence-watchdog` beside it, a small process that talks to herdr and to
// nothing else, and keeps it armed with a [Plan]: when the fence's
// deadline falls (on the machine's boot clock, which both processes read
// and which counts a suspend), which tabs to spare (the members pinned to
// the node), and what to do with the others (close their tabs, or
// interrupt their agents: --fence-policy). fleetd arms it again at every
// renewal of its lease, which moves the deadline on; a fleetd that runs
// acts at the deadline itself, and the watchdog, firing a little later
// ([Plan.FireAt]), finds nothing left to do.
//
// The watchdog reads plans from its standard input, one JSON object a
// line, and ends when that ends: a fleetd that exits (stopped cleanly or
// killed) takes its watchdog with it, as today's fleetd leaves its agents
// running for the next one to adopt. It is in a process group of its own,
// so that a terminal's Ctrl-Z, which stops fleetd, does not stop it.
//
// It never types text into a pane, never starts anything, never acts on a
// tab whose label is not one fleetd gave a member's tab, never acts on a
// member the plan spares, and never acts before its plan's deadline.
package fencewatch
