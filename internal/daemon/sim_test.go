package daemon

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// The simulation's agents are simagent's answering agents: a prompt makes
// the agent work, print its echo and end its turn. This pane was not
// started by fleetd, so the reply itself fails and is logged (the
// gateway side is covered by package simagent and the end-to-end tests).
func TestStartSimulation_AgentsAnswerPrompts(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	sim, err := startSimulation(statedir.At(t.TempDir()), nil, herdrsim.Options{Validator: validated.Schema()}, slog.New(slog.NewTextHandler(&logs, nil)))
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

// recordingValidator checks with herdr's schema and keeps the lines.
type recordingValidator struct {
	mu    sync.Mutex
	lines []string
}

func (v *recordingValidator) Request(line []byte) error {
	v.mu.Lock()
	v.lines = append(v.lines, string(line))
	v.mu.Unlock()
	return validated.Schema().Request(line)
}

func (v *recordingValidator) saw(substr string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, l := range v.lines {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

// Tests check every exchange with the simulated herdr against herdr's
// schema: Run hands Config.SimValidator to the simulation. The fake
// validates a line before it answers it, so once a call of ours has its
// answer the validator has seen it (comparing counts with the fake's
// recorded requests raced: a line is recorded before it is validated).
func TestRun_SimulationUsesTheConfiguredValidator(t *testing.T) {
	t.Parallel()
	v := &recordingValidator{}
	info, _ := runDaemon(t, Config{ManifestsDir: t.TempDir(), StateDir: t.TempDir(), SimValidator: v})
	c := herdr.New(&herdr.Options{SocketPath: info.Sim.SocketPath()})
	if _, err := c.CreateWorkspace(testCtx(t), herdr.WorkspaceCreateParams{Label: "validator-probe"}); err != nil {
		t.Fatal(err)
	}
	if !v.saw(`"validator-probe"`) {
		t.Error("the configured validator did not see a request the simulation answered")
	}
}
