package harness

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// Generic renders for every herdr agent kind without its own adapter
// (gemini, cursor, opencode, copilot, qwen, …): whatever the member's transport,
// the harness boundary is stdio and the next hop Streamable HTTP, through a
// command entry that runs `fleetd mcp-bridge`.
//
// What is proven and what is not: fleetd writes the entry in the common
// {"mcpServers": {NAME: {"command", "args"}}} JSON shape to
// ConfigDir/mcp.json and puts that path in the pane environment as
// FLEETD_MCP_CONFIG. fleetd has NOT verified, for any of these harnesses,
// a command-line flag or variable that makes it load that file, so the
// generic adapter adds no arguments. The operator wires it in: point the
// Profile's args or the harness's own settings at the file (its path is
// fixed: STATE_DIR/harness/NAME/mcp.json), or copy the entry into the
// harness's MCP settings. The entry carries no env block: the bridge reads
// the credential variable named by --token-env from the environment the
// harness gives it, which for most harnesses is the pane's. No tool-call
// timeout is set, because no spelling for one is proven.
type Generic struct{}

// GenericConfigFile is the name of the MCP JSON file under Input.ConfigDir.
const GenericConfigFile = "mcp.json"

// ConfigPathEnv is the pane variable naming the generic adapter's MCP file.
const ConfigPathEnv = "FLEETD_MCP_CONFIG"

type commandEntry struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// Render implements [Adapter].
func (Generic) Render(in Input) (Rendering, error) {
	// Every row runs through the bridge, whatever its transport.
	if !filepath.IsAbs(in.Executable) {
		return Rendering{}, fmt.Errorf("render harness config: the command bridge needs the absolute path of the fleetd executable, got %q", in.Executable)
	}
	if err := in.check(true); err != nil {
		return Rendering{}, err
	}
	servers := make(map[string]commandEntry, len(in.Rows))
	for _, r := range in.Rows {
		servers[r.Server] = commandEntry{Command: in.Executable, Args: bridgeArgs(r)}
	}
	data, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return Rendering{}, fmt.Errorf("render generic MCP config: %w", err)
	}
	path := filepath.Join(in.ConfigDir, GenericConfigFile)
	return Rendering{
		Env:   map[string]string{ConfigPathEnv: path},
		Files: []File{{Path: path, Data: append(data, '\n')}},
	}, nil
}
