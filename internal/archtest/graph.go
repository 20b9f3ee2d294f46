package archtest

// Third-party modules, named once.
const (
	yaml       = "go.yaml.in/yaml/v3"
	sigsyaml   = "sigs.k8s.io/yaml"
	fsnotify   = "github.com/fsnotify/fsnotify"
	prometheus = "github.com/prometheus/client_golang"
	rate       = "golang.org/x/time/rate"
	backoff    = "github.com/cenkalti/backoff/v5"
	errgroup   = "golang.org/x/sync/errgroup"
	mcpsdk     = "github.com/modelcontextprotocol/go-sdk"
	cobra      = "github.com/spf13/cobra"
	pflag      = "github.com/spf13/pflag" // cobra's flags: the flag a typo meant
	difflib    = "github.com/pmezard/go-difflib"
	// jsonschemaGo is the MCP go-sdk's own tool-schema library (the SDK's
	// tool definitions are built from it); it is not a validator of
	// herdr's exchanges and stays in the binary.
	jsonschemaGo = "github.com/google/jsonschema-go"
	// schemaValidator is herdr's JSON Schema validator: tests only.
	schemaValidator = "github.com/santhosh-tekuri/jsonschema"
	// etcd's client (and the API types it speaks) are in the binary, for
	// the etcd store; etcd's server is for tests and the demo helper only.
	etcdClient = "go.etcd.io/etcd/client/v3"
	etcdAPI    = "go.etcd.io/etcd/api/v3"
	etcdServer = "go.etcd.io/etcd/server/v3"
	zap        = "go.uber.org/zap"
	goleak     = "go.uber.org/goleak"
	// xsys reads the machine's boot clock, which fleetd and its fence
	// watchdog share.
	xsys = "golang.org/x/sys"
)

// grpc is etcd's client's transport; the etcd store follows its
// connection's state (no member reachable).
const grpc = "google.golang.org/grpc"

// fleetdBinary is the main package whose links [notInFleetd] restricts.
const fleetdBinary = "cmd/fleetd"

// notInFleetd lists what the fleetd binary must not link (import paths;
// a path covers the packages inside it): the schema validator and the two
// packages of ours that use it, and etcd's server with the package of ours
// that embeds it for tests; and the test helpers statedbtest, syncbuf and
// heaptest.
var notInFleetd = []string{
	schemaValidator,
	"github.com/fleetd-dev/fleetd/herdr/internal/schemacheck",
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated",
	"go.etcd.io/etcd/server",
	"github.com/fleetd-dev/fleetd/internal/etcdtest",
	"github.com/fleetd-dev/fleetd/internal/statedb/statedbtest",
	"github.com/fleetd-dev/fleetd/internal/syncbuf",
	"github.com/fleetd-dev/fleetd/internal/heaptest",
}

// allowed is fleetd's package graph, the one place it is written down:
// each package and what it may import besides the standard library. Every
// edge points to the same layer or a lower one (layers, below), and every
// edge is used: an import that goes away takes its edge with it.
var allowed = Graph{
	// The API: types at the bottom, the strict decoder on them.
	"api/v1alpha1": {},
	"api/decode":   {"api/v1alpha1", "internal/filekind", yaml},
	"api/encode":   {"api/v1alpha1", "api/decode", "internal/yamledit", yaml},

	// Leaves: no fleetd imports beyond atomic files.
	"internal/atomicfile": {},
	"internal/clock":      {"internal/notify"},
	"internal/version":    {},
	"internal/statedir":   {"internal/filekind"},
	"internal/filekind":   {},
	"internal/vocab":      {},
	"internal/guard":      {"api/v1alpha1"},
	"internal/plan":       {"api/v1alpha1"},
	"internal/tokens":     {"internal/atomicfile", "internal/sortedindex", "internal/statedb", "internal/statedir"},
	"internal/termtext":   {},
	"internal/tail":       {"api/v1alpha1", "herdr", "internal/clock"},
	"internal/yamledit":   {yaml},
	"internal/notify":     {},
	"internal/sse":        {},
	"internal/quota":      {},
	// sortedindex: entries by key in a sorted slice, where a map of every
	// member would take six times the room.
	"internal/sortedindex": {},
	// syncbuf: a buffer tests read while the code under test logs into
	// it (tests only: see notInFleetd).
	"internal/syncbuf": {},
	// heaptest: the live heap, for the benchmarks of what a structure
	// keeps per member.
	"internal/heaptest": {},
	// The append-only file of checksummed record batches, and fleetd's
	// durable per-member state kept in one.
	"internal/journal": {"internal/statedir"},
	"internal/statedb": {"internal/atomicfile", "internal/journal", "internal/statedir"},
	// statedbtest: a file layer that fails writes, for tests.
	"internal/statedb/statedbtest": {"internal/statedb"},
	// git, run with fixed arguments; gitrepotest makes throwaway
	// repositories for tests.
	"internal/gitrepo":             {},
	"internal/gitrepo/gitrepotest": {},

	// herdr: the client is stdlib only; the fake never imports the client
	// (it runs git for the worktree methods, as herdr does);
	// the schema validator and the fake-with-validation are for tests and
	// test tools only (see notInFleetd).
	"herdr":                      {},
	"herdr/herdrsim":             {"internal/clock", "internal/notify", "internal/gitrepo"},
	"herdr/internal/schemacheck": {schemaValidator},
	"herdr/herdrsim/validated":   {"herdr/herdrsim", "herdr/internal/schemacheck"},

	// The messaging core: neither herdr nor the controllers. Its herdr
	// adapter is where herdr's error codes are classified.
	"internal/messaging":             {"api/v1alpha1", "internal/clock", "internal/journal", "internal/notify", "internal/sortedindex", "internal/statedb", "internal/statedir", "internal/termtext", prometheus},
	"internal/messaging/herdrprompt": {"herdr", "internal/messaging", "internal/tail"},

	// The controllers side: never the harness adapters, the token
	// registry, the messaging core or mcp. controllers/launch is the one
	// launch contract, a leaf that internal/harness implements.
	"controllers/launch":      {"api/v1alpha1"},
	"internal/store":          {"api/v1alpha1", "api/decode", "internal/clock", "internal/notify"},
	"internal/store/dirstore": {"api/v1alpha1", "api/decode", "api/encode", "internal/store", "internal/atomicfile", "internal/clock", "internal/statedir", "internal/yamledit", errgroup, fsnotify, yaml},
	"controllers/workqueue":   {"internal/clock", "internal/notify", prometheus, rate},
	"controllers/herdrcache":  {"herdr", "internal/clock", "internal/sortedindex", prometheus},
	"controllers": {"api/v1alpha1", "api/decode", "controllers/launch", "internal/store", "controllers/workqueue",
		"controllers/herdrcache", "herdr", "internal/clock", "internal/gitrepo", "internal/notify", "internal/rollout", "internal/sortedindex", "internal/statedb", prometheus},
	// A Profile's rollout apart from the controller that drives it: the
	// revisions, where they are kept (the state database; etcd in
	// etcdrollout), the recorder that follows the desired state, and the
	// pure status.
	"internal/rollout":             {"api/v1alpha1", "internal/clock", "internal/notify", "internal/sortedindex", "internal/statedb", "internal/store", errgroup},
	"internal/rollout/etcdrollout": {"api/v1alpha1", "internal/clock", "internal/etcd/informer", "internal/notify", "internal/retry", "internal/rollout", etcdClient, etcdAPI},

	// The harness adapters implement controllers/launch; nothing else of
	// the controllers.
	"internal/harness": {"api/v1alpha1", "controllers/launch", "herdr", "internal/plan", "internal/tokens", "internal/atomicfile", "internal/statedir"},

	// The north face: desired state through mcp's own interface (the
	// store's contract only for its shared errors; the rollout package's
	// revisions, which undo writes back), never controllers or a store
	// backend.
	"mcp":                {"api/v1alpha1", "api/decode", "internal/clock", "internal/guard", "internal/messaging", "internal/notify", "internal/quota", "internal/rollout", "internal/sse", "internal/store", "internal/tail", "internal/tokens", mcpsdk, jsonschemaGo, prometheus, rate, sigsyaml},
	"internal/mcpbridge": {"internal/sse", mcpsdk},
	"internal/simagent":  {"herdr/herdrsim", "internal/mcpbridge", "internal/harness", mcpsdk},
	"internal/migrate":   {"api/decode", "internal/atomicfile", "internal/yamledit", yaml},
	// The browser console: the controllers, the messaging core and the
	// desired state through interfaces it declares itself (the store's
	// contract only for its shared errors), never mcp, controllers or herdr.
	"internal/console": {"api/v1alpha1", "api/decode", "internal/clock", "internal/guard", "internal/messaging", "internal/quota", "internal/sse", "internal/store", "internal/tail", "internal/tokens", difflib, sigsyaml},

	// etcd, one primitive each: the retry pace of every loop, the one
	// reader of a key space (list, watch, relist), the node's one lease.
	"internal/retry":         {"internal/clock", backoff},
	"internal/etcd/informer": {"internal/clock", "internal/notify", "internal/retry", etcdClient, etcdAPI, grpc},
	"internal/etcd/session":  {"internal/clock", "internal/notify", "internal/retry", etcdClient, etcdAPI},

	// The etcd store implements internal/store's interface on etcd's
	// client, each key space through the informer; etcdtest embeds etcd's
	// server for tests (see notInFleetd), and asks its members through
	// etcd's client whether they applied a compaction.
	"internal/store/etcdstore": {"api/v1alpha1", "api/decode", "internal/store", "internal/atomicfile", "internal/clock", "internal/etcd/informer", "internal/notify", "internal/statedir", etcdClient, etcdAPI},
	"internal/etcdtest":        {"internal/notify", etcdServer, etcdClient, etcdAPI, zap, goleak},
	// The fleet on etcd: the scheduler around Place, which reads the fleet
	// through an interface it declares (package fleet implements it); the
	// fleet's nodes, statuses, token and view, which the daemon wires.
	"internal/scheduler": {"api/v1alpha1", "internal/clock", "internal/etcd/session", "internal/notify", "internal/retry", "internal/store/etcdstore", etcdClient, errgroup},
	"internal/fleet": {"api/v1alpha1", "internal/atomicfile", "internal/clock", "internal/etcd/informer", "internal/etcd/session", "internal/messaging", "internal/notify",
		"internal/retry", "internal/scheduler", "internal/statedir", "internal/store/etcdstore", "internal/tokens", etcdClient, etcdAPI, rate},
	// The fence's watchdog, a process of its own: herdr's client alone.
	"internal/fencewatch": {"herdr", xsys},
	// Messaging across nodes: the messaging core and etcd's client,
	// neither mcp nor the controllers nor herdr.
	"internal/fleetmsg": {"api/v1alpha1", "internal/clock", "internal/etcd/informer", "internal/etcd/session", "internal/messaging", "internal/notify", "internal/retry", etcdClient, etcdAPI},

	// The listener: bounded connections, evicting those that wait on
	// their client longest.
	"internal/listener": {"internal/notify"},

	// The wiring: everything above (never the test-only herdr packages).
	"internal/daemon": {"api/v1alpha1", "controllers", "internal/store", "internal/store/dirstore", "internal/rollout", "internal/rollout/etcdrollout", "herdr", "herdr/herdrsim", "internal/clock",
		"internal/statedb", "internal/statedir", "internal/harness", "internal/messaging", "internal/messaging/herdrprompt", "internal/plan", "internal/simagent",
		"internal/tail", "internal/tokens", "internal/version", "internal/console", "internal/listener", "internal/quota", "mcp", prometheus, errgroup, "internal/store/etcdstore",
		"internal/etcd/session", "internal/fleet", "internal/fencewatch", "internal/scheduler", "internal/fleetmsg", "internal/retry", etcdClient, zap},

	// The command line's libraries: JSONPath, label selectors and the
	// printers print and pick what the client reads from a running fleetd
	// (its REST API and gateway, whose wire types are mcp's); manifests
	// reads the Members, Profiles and Tenants of -f.
	"internal/cli/jsonpath":  {"internal/termtext"},
	"internal/cli/labels":    {},
	"internal/cli/printers":  {"api/v1alpha1", "internal/cli/jsonpath", "internal/termtext", "mcp", sigsyaml},
	"internal/cli/client":    {"api/v1alpha1", "internal/mcpbridge", "internal/sse", "internal/termtext", "internal/version", "mcp", mcpsdk},
	"internal/cli/manifests": {"api/v1alpha1", "api/decode", yaml},

	// Commands: the daemon and what each command needs. herdr-sim is a test
	// double as a process and checks requests against herdr's schema.
	fleetdBinary: {"api/v1alpha1", "api/decode", "api/encode", "internal/daemon", "internal/harness", "internal/listener", "internal/mcpbridge", "internal/messaging", "internal/migrate",
		"internal/statedb", "internal/statedir", "internal/store/etcdstore", "internal/tail", "internal/tokens", "internal/termtext", "internal/version", "internal/console", "mcp",
		"internal/cli/client", "internal/cli/labels", "internal/cli/manifests", "internal/cli/printers", "internal/fencewatch", cobra, pflag, difflib},
	"cmd/herdr-sim": {"herdr/herdrsim", "herdr/herdrsim/validated"},
	// make run-cluster: an embedded etcd and two fleetd processes, which it
	// gives the example objects with `fleetd apply`.
	"cmd/etcd-demo": {"api/v1alpha1", "internal/etcdtest", "internal/scheduler", "internal/statedir"},

	// This package.
	"internal/archtest": {},

	// Whole-system tests and benchmarks: anything; nothing imports them.
	"test/...": {Any},
}

// layers are fleetd's architecture from the bottom up: a package may import
// packages of its own layer and of the layers below, never of one above
// (TestLayers checks every allowed edge of the graph against them). The
// most specific entry places a package; whole-system tests are in none.
var layers = []Layer{
	// The leaves: no fleetd behaviour, only what every layer shares.
	{Name: "leaves", Packages: []string{"internal/atomicfile", "internal/clock", "internal/filekind", "internal/notify", "internal/quota", "internal/retry", "internal/sortedindex", "internal/sse",
		"internal/statedir", "internal/journal", "internal/statedb", "internal/statedb/statedbtest", "internal/syncbuf", "internal/heaptest", "internal/termtext", "internal/version", "internal/yamledit", "internal/vocab", "internal/archtest"}},
	// The API objects, their decoding and what is a pure function of them:
	// the store's contract, the MCP plan, the subscription guard, the
	// legacy migration.
	{Name: "api", Packages: []string{"api/...", "internal/store", "internal/plan", "internal/guard", "internal/migrate"}},
	// The clients of the systems fleetd drives: herdr (and its simulation),
	// etcd's primitives, git.
	{Name: "herdr, etcd and git", Packages: []string{"herdr/...", "internal/etcd/...", "internal/etcdtest", "internal/gitrepo/..."}},
	// The south face and the messaging core: the controllers and what they
	// run on (the store's backends, the launch contract's harness
	// adapters, the tokens, the terminal tail).
	{Name: "controllers and messaging", Packages: []string{"controllers/...", "internal/messaging/...", "internal/store/...", "internal/rollout/...",
		"internal/harness", "internal/tokens", "internal/tail"}},
	// The north face: the gateway, the console, the stdio bridge and the
	// simulated agents that call the gateway.
	{Name: "mcp and console", Packages: []string{"mcp/...", "internal/console", "internal/mcpbridge", "internal/simagent"}},
	// The fleet on etcd: nodes, statuses, the token, the view, the
	// scheduler, messaging across nodes, the fence's watchdog.
	{Name: "fleet", Packages: []string{"internal/fleet/...", "internal/fleetmsg", "internal/scheduler", "internal/fencewatch"}},
	// The wiring of a running fleetd.
	{Name: "daemon", Packages: []string{"internal/daemon", "internal/listener"}},
	// The commands and the command line's libraries.
	{Name: "cmd", Packages: []string{"cmd/...", "internal/cli/..."}},
}
