package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// defaultGatewayURL is the MCP endpoint of a `fleetd serve` with default
// flags.
const defaultGatewayURL = "http://127.0.0.1:8080/mcp"

// mcpConfigOptions are `fleetd mcp-config`'s.
type mcpConfigOptions struct {
	ioStreams
	harness    string
	gatewayURL string
	stateDir   string
}

func newMCPConfigCmd() *cobra.Command {
	o := &mcpConfigOptions{}
	cmd := &cobra.Command{
		Use:   "mcp-config --harness " + strings.Join(harness.PrimaryHarnesses(), "|"),
		Short: "Print what your own agent session runs or pastes to mount the fleetd gateway as the primary",
		Long: `mcp-config prints how the primary — your own Claude Code, Codex or Claude
Desktop session — mounts fleetd's MCP gateway, authenticated with the primary
token in STATE_DIR/primary.token (created, mode 0600, if it does not exist).

  claude, codex    shell lines: an export that reads the token from its file,
                   then the harness's own "mcp add" command. The token is
                   never an argument: the harness gets a variable reference.
  claude-desktop   JSON for claude_desktop_config.json: a command entry that
                   runs "fleetd mcp-bridge", with the token in its env block.
                   Keep that file private.

Run the shell lines with eval in the shell the harness starts from, so that
the exports stay (piped into sh they would vanish with the child shell), and
keep the exports in your shell profile.

Nothing printed changes which model account the primary uses.`,
		Example: `  eval "$(fleetd mcp-config --harness claude)"
  fleetd mcp-config --harness codex --url http://127.0.0.1:9090/mcp
  fleetd mcp-config --harness claude-desktop`,
		Args: cobra.NoArgs,
		RunE: runVerb(o),
	}
	cmd.Flags().StringVar(&o.harness, "harness", "", "the primary's harness: "+strings.Join(harness.PrimaryHarnesses(), ", "))
	cmd.Flags().StringVar(&o.gatewayURL, "url", defaultGatewayURL, "the gateway's MCP endpoint")
	cmd.Flags().StringVar(&o.stateDir, "state-dir", defaultStateDir(), "fleetd's state directory, where primary.token lives")
	return cmd
}

func (o *mcpConfigOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *mcpConfigOptions) Validate() error {
	if !slices.Contains(harness.PrimaryHarnesses(), o.harness) {
		want := strings.Join(harness.PrimaryHarnesses(), ", ")
		if o.harness == "" {
			return fmt.Errorf("--harness is required; want one of %s", want)
		}
		return fmt.Errorf("unknown harness %q; want one of %s", o.harness, want)
	}
	return nil
}

// Run prints the primary's configuration, minting the primary token if
// the state directory has none.
func (o *mcpConfigOptions) Run(context.Context) error {
	in := harness.PrimaryInput{Harness: o.harness, URL: o.gatewayURL}
	state, err := statedir.Abs(o.stateDir)
	if err != nil {
		return fmt.Errorf("mcp-config: %w", err)
	}
	in.TokenFile = state.PrimaryToken()
	if in.Token, err = tokens.PrimaryToken(state.Root()); err != nil {
		return fmt.Errorf("mcp-config: primary token: %w", err)
	}
	if o.harness == harness.PrimaryClaudeDesktop {
		if in.Executable, err = fleetdExecutable(); err != nil {
			return fmt.Errorf("mcp-config: %w", err)
		}
	}
	text, err := harness.PrimaryConfig(in)
	if err != nil {
		return fmt.Errorf("mcp-config: %w", err)
	}
	if _, err := fmt.Fprint(o.out, text); err != nil {
		return err
	}
	if o.harness == harness.PrimaryClaudeDesktop {
		fmt.Fprintln(o.errOut, "fleetd mcp-config: merge this into Claude Desktop's claude_desktop_config.json; it holds the primary token, so keep that file private.")
	}
	return nil
}

// fleetdExecutable is the absolute, symlink-free path of the running fleetd,
// what a command entry must name to start the bridge.
func fleetdExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locate the fleetd executable: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return exe, nil
}
