package multihost

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/internal/mcpbridge"
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
	bt, err := mcpbridge.NewBearerTransport(url, token, nil)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := sdk.NewClient(&sdk.Implementation{Name: "multihost-test", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bt}, MaxRetries: -1}, nil)
	if err != nil {
		tb.Fatalf("connect to the gateway %s: %v", url, err)
	}
	tb.Cleanup(func() { s.Close() })
	return &gwSession{tb: tb, s: s}
}

// call calls tool and decodes its structured result into out, or returns
// the tool's error (a failed call is one with code "protocol").
func (g *gwSession) call(ctx context.Context, tool string, args map[string]any, out any) *mcp.ToolError {
	res, err := g.s.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return &mcp.ToolError{Code: "protocol", Message: err.Error()}
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if res.IsError {
		var te mcp.ToolError
		if err := json.Unmarshal(raw, &te); err != nil || te.Code == "" {
			return &mcp.ToolError{Code: "undecodable", Message: string(raw)}
		}
		return &te
	}
	if out != nil {
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
