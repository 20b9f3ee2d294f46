package harness

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Codex renders for the Codex CLI as `-c key=value` overrides, which Codex
// parses as TOML and layers over ~/.codex/config.toml — no file is written.
//
// Proven spellings (DESIGN §1): `codex mcp add NAME --url URL
// --bearer-token-env-var VAR` writes [mcp_servers.NAME] url / bearer_token_env_var,
// and Codex reports such a server's transport as streamable_http; its per-server
// tool-call timeout is tool_timeout_sec (seconds, a float).
//
// A stdio row becomes command / args running `fleetd mcp-bridge`. Codex
// starts stdio servers with a scrubbed environment, so the row's credential
// variable is forwarded by name with env_vars. Caveat: if the operator's own
// config.toml already defines [mcp_servers.fleetd] with a url, the merged
// table holds both url and command, which Codex rejects; members using
// stdio with Codex need that name free.
type Codex struct{}

// Render implements [Adapter].
func (Codex) Render(in Input) (Rendering, error) {
	if err := in.check(false); err != nil {
		return Rendering{}, err
	}
	var args []string
	set := func(server, key, tomlValue string) {
		args = append(args, "-c", "mcp_servers."+server+"."+key+"="+tomlValue)
	}
	for _, r := range in.Rows {
		switch r.Transport {
		case v1alpha1.TransportStreamableHTTP:
			set(r.Server, "url", tomlString(r.URL))
			set(r.Server, "bearer_token_env_var", tomlString(r.CredentialEnv))
		case v1alpha1.TransportStdio:
			set(r.Server, "command", tomlString(in.Executable))
			set(r.Server, "args", tomlArray(bridgeArgs(r)))
			set(r.Server, "env_vars", tomlArray([]string{r.CredentialEnv}))
		}
		set(r.Server, "tool_timeout_sec", tomlSeconds(in.toolTimeout().Seconds()))
	}
	return Rendering{Args: args}, nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func tomlArray(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = tomlString(s)
	}
	return "[" + strings.Join(quoted, ",") + "]"
}

// tomlSeconds writes a TOML float ("900.0", "1.5").
func tomlSeconds(s float64) string {
	v := strconv.FormatFloat(s, 'f', -1, 64)
	if !strings.ContainsAny(v, ".e") {
		v += ".0"
	}
	return v
}
