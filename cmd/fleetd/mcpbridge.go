package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/mcpbridge"
)

// mcpBridgeOptions are `fleetd mcp-bridge`'s.
type mcpBridgeOptions struct {
	ioStreams
	gatewayURL string
	tokenEnv   string
	token      string // $tokenEnv
}

func newMCPBridgeCmd() *cobra.Command {
	o := &mcpBridgeOptions{}
	cmd := &cobra.Command{
		Use:   "mcp-bridge --url URL [--token-env FLEETD_TOKEN]",
		Short: "Serve MCP on stdio and relay every message to the fleetd gateway over Streamable HTTP",
		Long: `mcp-bridge is the command a stdio-only harness (Claude Desktop, or an agent
kind without a proven HTTP spelling) starts as its MCP server. It relays every
JSON-RPC message between stdin/stdout and the gateway at --url — requests,
responses, notifications and progress in both directions — sending the bearer
token read from the environment variable named by --token-env.

It exits 0 when stdin closes, once the calls still in flight are answered
on stdout. It exits 1 with a message on stderr when the
token variable is empty, the gateway cannot be reached, or the gateway
refuses the token. stdout carries only MCP messages.`,
		Example: `  FLEETD_TOKEN=… fleetd mcp-bridge --url http://127.0.0.1:8080/mcp`,
		Args:    cobra.NoArgs,
		RunE:    runVerb(o),
	}
	cmd.Flags().StringVar(&o.gatewayURL, "url", defaultGatewayURL, "the gateway's Streamable HTTP MCP endpoint")
	cmd.Flags().StringVar(&o.tokenEnv, "token-env", "FLEETD_TOKEN", "name of the environment variable holding the bearer token")
	return cmd
}

func (o *mcpBridgeOptions) Complete(*cobra.Command, []string) error {
	o.token = os.Getenv(o.tokenEnv)
	return nil
}

func (o *mcpBridgeOptions) Validate() error { return nil }

// Run relays until stdin closes (exit 0) or the gateway fails (exit 1).
func (o *mcpBridgeOptions) Run(ctx context.Context) error {
	if o.token == "" {
		fmt.Fprintf(o.errOut, "fleetd mcp-bridge: $%s is empty or unset; it must hold the bearer token for the gateway (see `fleetd mcp-config`)\n", o.tokenEnv)
		return &exitError{code: 1}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := mcpbridge.Run(ctx, o.in, o.out, mcpbridge.Options{
		URL:      o.gatewayURL,
		Token:    o.token,
		TokenEnv: o.tokenEnv,
		Logger:   slog.New(slog.NewTextHandler(o.errOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(o.errOut, "fleetd mcp-bridge: %v\n", err)
		return &exitError{code: 1}
	}
	return nil
}
