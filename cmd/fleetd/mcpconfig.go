package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// defaultGatewayURL is the MCP endpoint of a `fleetd serve` with default
// flags.
const defaultGatewayURL = client.DefaultServer + "/mcp"

// mcpConfigCheckTimeout bounds the request that checks the token against
// the running fleetd.
const mcpConfigCheckTimeout = 10 * time.Second

// mcpConfigOptions are `fleetd mcp-config`'s.
type mcpConfigOptions struct {
	ioStreams
	serverOptions
	harness    string
	gatewayURL string // --url, deprecated: the gateway's MCP endpoint
}

func newMCPConfigCmd() *cobra.Command {
	o := &mcpConfigOptions{}
	cmd := &cobra.Command{
		Use:   "mcp-config --harness " + strings.Join(harness.PrimaryHarnesses(), "|"),
		Short: "Print what your own agent session runs or pastes to mount the fleetd gateway as the primary",
		Long: `mcp-config prints how the primary — your own Claude Code, Codex or Claude
Desktop session — mounts the MCP gateway (SERVER/mcp) of the fleetd running
at --server, authenticated with the primary token in STATE_DIR/primary.token.

  claude, codex    shell lines: an export that reads the token from its file,
                   then the harness's own "mcp add" command. The token is
                   never an argument: the harness gets a variable reference.
  claude-desktop   JSON for claude_desktop_config.json: a command entry that
                   runs "fleetd mcp-bridge", with the token in its env block.
                   Keep that file private.

It first checks the token against that fleetd and prints nothing when the
harness would be refused: no fleetd answers at --server, the state directory
has no primary token (no fleetd has started on it: fleetd serve creates it),
or the fleetd there refuses the token (it uses another state directory:
give its --state-dir, which its banner names).

Run the shell lines with eval in the shell the harness starts from, so that
the exports stay (piped into sh they would vanish with the child shell), and
keep the exports in your shell profile.

Nothing printed changes which model account the primary uses.`,
		Example: `  eval "$(fleetd mcp-config --harness claude)"
  fleetd mcp-config --harness codex --server http://127.0.0.1:9090
  fleetd mcp-config --harness claude-desktop`,
		Args: cobra.NoArgs,
		RunE: runVerb(o),
	}
	cmd.Flags().StringVar(&o.harness, "harness", "", "the primary's harness: "+strings.Join(harness.PrimaryHarnesses(), ", "))
	o.serverOptions.addFlags(cmd)
	cmd.Flags().StringVar(&o.gatewayURL, "url", "", "the gateway's MCP endpoint (SERVER/mcp)")
	// Deprecated: hidden from the help, and Complete says what replaces it
	// on the error stream (cobra's MarkDeprecated would print its notice
	// on the output, into what `eval` runs).
	cmd.Flags().Lookup("url").Hidden = true
	return cmd
}

func (o *mcpConfigOptions) Complete(cmd *cobra.Command, _ []string) error {
	fromEnv(cmd, "server", "FLEETD_SERVER", &o.server) // not $FLEETD_TOKEN: the config reads the primary's token file
	if cmd.Flags().Changed("url") {
		fmt.Fprintln(o.errOut, "fleetd mcp-config: --url is deprecated: use --server with fleetd's base URL (the gateway is SERVER/mcp), as the other commands take it")
	}
	if o.gatewayURL != "" && !cmd.Flags().Changed("server") {
		o.server = strings.TrimSuffix(strings.TrimRight(o.gatewayURL, "/"), "/mcp")
	}
	if o.gatewayURL == "" {
		o.gatewayURL = strings.TrimRight(o.server, "/") + "/mcp"
	}
	return nil
}

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

// Run checks the primary token against the running fleetd, then prints
// the primary's configuration. It never creates a token: one that no
// running fleetd holds would only get the harness a 401.
func (o *mcpConfigOptions) Run(ctx context.Context) error {
	in := harness.PrimaryInput{Harness: o.harness, URL: o.gatewayURL}
	if u, err := url.Parse(o.gatewayURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return o.fail("mcp-config", "--server %s: want an absolute http:// or https:// URL without user info, such as %s", o.server, client.DefaultServer)
	}
	state, err := statedir.Abs(o.stateDir)
	if err != nil {
		return o.fail("mcp-config", "%v", err)
	}
	o.stateDir, in.TokenFile = state.Root(), state.PrimaryToken()
	// The token file's, never $FLEETD_TOKEN's: the config reads the file.
	token, err := os.ReadFile(in.TokenFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return o.fail("mcp-config", "no primary token in %s: no fleetd has started with this state directory. "+
			"Start fleetd first (fleetd serve; make run), or give the --state-dir of the fleetd at %s (its banner names it)", o.stateDir, o.server)
	case err != nil:
		return o.fail("mcp-config", "read the primary token: %v", err)
	}
	in.Token = strings.TrimSpace(string(token))
	if err := o.checkToken(ctx, client.New(o.server, in.Token)); err != nil {
		return err
	}
	if o.harness == harness.PrimaryClaudeDesktop {
		if in.Executable, err = fleetdExecutable(); err != nil {
			return o.fail("mcp-config", "%v", err)
		}
	}
	text, err := harness.PrimaryConfig(in)
	if err != nil {
		return o.fail("mcp-config", "%v", err)
	}
	if _, err := fmt.Fprint(o.out, text); err != nil {
		return err
	}
	if o.harness == harness.PrimaryClaudeDesktop {
		fmt.Fprintln(o.errOut, "fleetd mcp-config: merge this into Claude Desktop's claude_desktop_config.json; it holds the primary token, so keep that file private.")
	}
	return nil
}

// checkToken asks the fleetd at o.server to accept the primary token, and
// says why the harness would be refused when it does not.
func (o *mcpConfigOptions) checkToken(ctx context.Context, c *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, mcpConfigCheckTimeout)
	defer cancel()
	var list struct{}
	err := c.Get(ctx, "/members", &list)
	var he *client.HTTPError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &he) && he.Status == http.StatusUnauthorized:
		return o.fail("mcp-config", "the fleetd at %s refuses the primary token in %s, so your harness would be refused too: "+
			"that fleetd uses another state directory; give its --state-dir (its banner names it). "+
			"In a fleet on etcd the fleet's token is the one its first node minted: copy that node's primary.token here (mode 0600)",
			o.server, o.stateDir)
	case errors.As(err, &he):
		return o.fail("mcp-config", "the fleetd at %s did not accept the primary token: %v", o.server, err)
	default:
		return o.fail("mcp-config", "%v; a harness would not connect either: start fleetd first, or give its address with --server", err)
	}
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
