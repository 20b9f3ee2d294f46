package harness

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Claude renders for Claude Code.
//
// Proven spellings (checked against the real CLI, DESIGN §1): `claude
// --mcp-config PATH` loads a JSON file of the form {"mcpServers": {NAME:
// entry}}; an entry {"type": "http", "url": …, "headers": {…}} is a
// Streamable HTTP server, and Claude Code expands ${VAR} in headers (and in a
// stdio entry's command, args and env) from its own environment, so the
// bearer token stays a reference. Claude Code reads its MCP tool-call timeout
// in milliseconds from the MCP_TOOL_TIMEOUT environment variable.
//
// A stdio row becomes a {"type": "stdio"} command entry running `fleetd
// mcp-bridge`, whose env maps the credential variable to itself so the bridge
// sees it whatever Claude Code passes to stdio servers by default.
type Claude struct{}

// ClaudeConfigFile is the name of the MCP JSON file under Input.ConfigDir.
const ClaudeConfigFile = "claude-mcp.json"

type claudeEntry struct {
	Type    string            `json:"type"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Render implements [Adapter].
func (Claude) Render(in Input) (Rendering, error) {
	if err := in.check(true); err != nil {
		return Rendering{}, err
	}
	servers := make(map[string]claudeEntry, len(in.Rows))
	for _, r := range in.Rows {
		ref := "${" + r.CredentialEnv + "}"
		switch r.Transport {
		case v1alpha1.TransportStreamableHTTP:
			servers[r.Server] = claudeEntry{Type: "http", URL: r.URL, Headers: map[string]string{"Authorization": "Bearer " + ref}}
		case v1alpha1.TransportStdio:
			servers[r.Server] = claudeEntry{Type: "stdio", Command: in.Executable, Args: bridgeArgs(r), Env: map[string]string{r.CredentialEnv: ref}}
		}
	}
	data, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return Rendering{}, fmt.Errorf("render claude MCP config: %w", err)
	}
	path := filepath.Join(in.ConfigDir, ClaudeConfigFile)
	return Rendering{
		Args:  []string{"--mcp-config", path},
		Env:   map[string]string{"MCP_TOOL_TIMEOUT": strconv.FormatInt(in.toolTimeout().Milliseconds(), 10)},
		Files: []File{{Path: path, Data: append(data, '\n')}},
	}, nil
}
