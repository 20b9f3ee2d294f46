// Package simagent gives the agents of the embedded simulated herdr
// (`fleetd serve --herdr=sim`) something to say: when a simulated agent is
// prompted it goes working, prints "echo: <prompt>" to its terminal, connects
// to the fleetd gateway as a real MCP client — with the FLEETD_URL and
// FLEETD_TOKEN found in its own pane's environment, exactly as a coding
// agent started by fleetd would — calls bridge_reply with that text, and
// goes idle again. It lets a user try delegation end to end (`fleetd send
// reviewer hello` prints "echo: hello") without a real agent. A prompt
// that starts with "sleep N " keeps the agent working for N seconds first
// ([SleepPrefix]; `fleetd send reviewer "sleep 5 hello"`), a turn long
// enough to watch fleetd wait for it before it closes or replaces the
// agent. Each agent reports its own session once ready, and an agent
// relaunched to resume it reports the same one, as a real harness's
// integration does: that is how fleetd keeps an agent's memory.
//
// The package is the MCP-speaking half of the simulation; package herdrsim
// stays free of MCP and only calls the [herdrsim.Behavior] hook this
// package builds. An agent learns where and as whom to connect from its
// pane's environment and nothing else: it never reads fleetd's state
// directory, token registry or configuration, so it authenticates as the
// worker it is, and a wrong or revoked token fails as it would for a real
// agent.
//
// Each prompt is handled in its own goroutine owned by [Agents]; [Agents.Close]
// cancels the ones still running and waits for them. A failure (no
// gateway, a refused token, a tool error) is logged and the agent goes idle
// anyway, the way an agent that could not reach its gateway still ends its
// turn; it never stops the simulation. Tokens are never logged.
package simagent
