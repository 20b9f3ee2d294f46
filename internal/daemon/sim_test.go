package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrtest"
	"github.com/fleetd-dev/fleetd/herdr/herdrtest/validated"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// The simulation's agents are simagent's answering agents: a prompt makes
// the agent work, print its echo and end its turn. This pane was not
// started by fleetd, so the reply itself fails and is logged (the
// gateway side is covered by package simagent and the end-to-end tests).
func TestStartSimulation_AgentsAnswerPrompts(t *testing.T) {
	var logs lockedBuffer
	sim, err := startSimulation(statedir.At(t.TempDir()), herdrtest.Options{Validator: validated.Schema()}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	c := herdr.New(&herdr.Options{SocketPath: sim.SocketPath()})
	ctx := t.Context()
	ws, err := c.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "w"})
	if err != nil {
		t.Fatal(err)
	}
	pane := ws.RootPane.PaneID
	if _, err := c.LaunchAgent(ctx, herdr.AgentStartParams{Name: "w", Kind: "claude", PaneID: pane}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitAgent(ctx, herdr.AgentWaitParams{Target: pane, Until: []herdr.AgentStatus{herdr.StatusIdle}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PromptAgent(ctx, herdr.AgentPromptParams{Target: pane, Text: "hello",
		Wait: &herdr.AgentPromptWait{Until: []herdr.AgentStatus{herdr.StatusIdle, herdr.StatusDone}}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := sim.Pane(pane); !strings.Contains(st.Screen, "echo: hello") {
		t.Errorf("screen does not show the echo:\n%s", st.Screen)
	}
	if err := sim.Close(); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "component=sim-agent") || !strings.Contains(got, "not started by fleetd") {
		t.Errorf("log does not report the failed reply:\n%s", got)
	}
}

// countingValidator checks with herdr's schema and counts the lines.
type countingValidator struct {
	mu sync.Mutex
	n  int
}

func (v *countingValidator) Request(line []byte) error {
	v.mu.Lock()
	v.n++
	v.mu.Unlock()
	return validated.Schema().Request(line)
}

func (v *countingValidator) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n
}

// Tests check every exchange with the simulated herdr against herdr's
// schema: Run hands Config.SimValidator to the simulation.
func TestRun_SimulationUsesTheConfiguredValidator(t *testing.T) {
	v := &countingValidator{}
	info, _ := runDaemon(t, Config{ManifestsDir: t.TempDir(), StateDir: t.TempDir(), SimValidator: v})
	// The controllers' first listing of herdr.
	if err := info.Sim.WaitCalls(testCtx(t), "workspace.list", 1); err != nil {
		t.Fatal(err)
	}
	if got, requests := v.count(), len(info.Sim.Requests()); got == 0 || got < requests {
		t.Errorf("validator saw %d of the simulation's %d requests", got, requests)
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
