package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/simagent"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// simulation is the embedded simulated herdr of `fleetd serve --herdr=sim`
// with agents that answer: a prompted agent replies "echo: <prompt>"
// through the gateway as the worker its pane's token names (package
// simagent), so that `fleetd send NAME hello` works without a real agent.
// The herdr fake itself stays free of MCP; the answering behaviour is
// injected here, on the serve side.
type simulation struct {
	*herdrsim.Server
	agents *simagent.Agents
}

// startSimulation starts the simulated herdr on a socket in the state
// directory, with one workspace open. Its agents become ready after
// opts.ReadyDelay and answer every prompt; failures to answer are logged on
// log. opts.Validator is the caller's (nil in fleetd); the socket, the
// workspace and the agents' behaviour are set here.
func startSimulation(state statedir.Layout, db *statedb.DB, opts herdrsim.Options, log *slog.Logger) (*simulation, error) {
	path := state.SimSocket()
	if err := os.MkdirAll(filepath.Dir(path), statedir.DirMode); err != nil {
		return nil, fmt.Errorf("simulated herdr: %w", err)
	}
	// A socket left by a killed run would make bind fail; the state lock
	// says no other fleetd is using this one.
	_ = os.Remove(path)
	if err := forgetEarlierPanes(db); err != nil {
		return nil, err
	}
	agents := simagent.New(&simagent.Options{Logger: log.With("component", "sim-agent")})
	opts.SocketPath, opts.InitialWorkspace, opts.Behavior = path, true, agents.Behavior()
	srv, err := herdrsim.Start(&opts)
	if err != nil {
		agents.Close()
		return nil, fmt.Errorf("simulated herdr: %w", err)
	}
	agents.Attach(srv)
	return &simulation{Server: srv, agents: agents}, nil
}

// forgetEarlierPanes drops the ownership records of an earlier run: the
// simulated herdr starts empty, so none of their panes can be adopted, and
// the controllers would take each for a pane that closed and count a
// restart of every member at every start. Its members start afresh.
func forgetEarlierPanes(db *statedb.DB) error {
	if err := db.Clear(statedb.Owned); err != nil {
		return fmt.Errorf("simulated herdr: drop the earlier run's pane records: %w", err)
	}
	return nil
}

// Close ends the agents' turns still in flight, then stops the simulated
// herdr.
func (s *simulation) Close() error {
	s.agents.Close()
	return s.Server.Close()
}
