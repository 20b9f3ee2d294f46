package multihost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/mcp"
)

// gwSession is an MCP session with a node's gateway: the primary's (the
// node's primary token) or a worker's (the FLEETD_TOKEN of its pane).
type gwSession struct {
	tb testing.TB
	s  *sdk.ClientSession
}

// gwConnect opens a session with the gateway at url as token; it closes
// when the test ends.
func gwConnect(tb testing.TB, ctx context.Context, url, token string) *gwSession {
	tb.Helper()
	return &gwSession{tb: tb, s: connectMCP(tb, ctx, url, token)}
}

// call calls tool and decodes its structured result into out, or returns
// the tool's error (a failed call is one with code "protocol").
func (g *gwSession) call(ctx context.Context, tool string, args map[string]any, out any) *mcp.ToolError {
	raw, err := toolCall[json.RawMessage](ctx, g.s, tool, args)
	var te *mcp.ToolError
	switch {
	case errors.As(err, &te):
		return te
	case err != nil:
		return &mcp.ToolError{Code: "protocol", Message: err.Error()}
	case out != nil:
		if err := json.Unmarshal(raw, out); err != nil {
			return &mcp.ToolError{Code: "undecodable", Message: fmt.Sprintf("%s: %v", raw, err)}
		}
	}
	return nil
}

// must calls tool, which must succeed.
func (g *gwSession) must(ctx context.Context, tool string, args map[string]any, out any) {
	g.tb.Helper()
	if err := g.call(ctx, tool, args, out); err != nil {
		g.tb.Fatalf("%s %v: %s: %s", tool, args, err.Code, err.Message)
	}
}
