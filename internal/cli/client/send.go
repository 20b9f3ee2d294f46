package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/internal/mcpbridge"
	"github.com/fleetd-dev/fleetd/internal/version"
	fleetmcp "github.com/fleetd-dev/fleetd/mcp"
)

// Send calls bridge_send on fleetd's MCP gateway: in.Content for member
// in.SessionID, waiting (in.Wait) up to in.TimeoutMs for the outcome. A
// tool error is a *fleetmcp.ToolError.
func (c *Client) Send(ctx context.Context, in fleetmcp.SendInput) (fleetmcp.SendOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(in.TimeoutMs)*time.Millisecond+heldCallMargin)
	defer cancel()
	session, err := c.mcpSession(ctx)
	if err != nil {
		return fleetmcp.SendOutput{}, err
	}
	defer session.Close()
	args := map[string]any{
		"content":   in.Content,
		"sessionId": in.SessionID,
		"timeoutMs": in.TimeoutMs,
		"wait":      in.Wait, // always sent: the tool's default is to wait
	}
	if in.TurnID != "" {
		args["turnId"] = in.TurnID
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "bridge_send", Arguments: args})
	if err != nil {
		return fleetmcp.SendOutput{}, fmt.Errorf("bridge_send: %w", err)
	}
	if res.IsError {
		return fleetmcp.SendOutput{}, toolError(res)
	}
	var out fleetmcp.SendOutput
	if err := decodeStructured(res, &out); err != nil {
		return out, fmt.Errorf("bridge_send: %w", err)
	}
	return out, nil
}

// mcpSession connects to the gateway at the server's /mcp as the holder
// of c's token. The HTTP client has no overall timeout: a held call is
// bounded by its context instead.
func (c *Client) mcpSession(ctx context.Context) (*mcp.ClientSession, error) {
	endpoint := c.server + "/mcp"
	bearer, err := mcpbridge.NewBearerTransport(endpoint, c.token, nil)
	if err != nil {
		return nil, err
	}
	auth := &refusalWatch{base: bearer}
	hc := &http.Client{Transport: auth}
	client := mcp.NewClient(&mcp.Implementation{Name: "fleetd-send", Version: version.Version}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		if auth.refused.Load() {
			return nil, fmt.Errorf("the gateway at %s refused the token: use the primary token of the fleetd you are talking to (--state-dir, --server)", endpoint)
		}
		return nil, fmt.Errorf("cannot reach fleetd's gateway at %s (is `fleetd serve` running?): %w", endpoint, err)
	}
	return session, nil
}

// refusalWatch notes whether the gateway refused the token (401); the
// token itself is added by mcpbridge's BearerTransport, only for requests to
// the gateway's own origin.
type refusalWatch struct {
	base    http.RoundTripper
	refused atomic.Bool
}

func (t *refusalWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.refused.Store(true)
	}
	return resp, err
}

// toolError reads a tool error result: the gateway's structured
// {code, message}, or failing that its text.
func toolError(res *mcp.CallToolResult) *fleetmcp.ToolError {
	var te fleetmcp.ToolError
	if decodeStructured(res, &te) == nil && te.Code != "" {
		return &te
	}
	text := contentText(res)
	if code, msg, ok := strings.Cut(text, ": "); ok && !strings.ContainsAny(code, " \n") {
		return &fleetmcp.ToolError{Code: code, Message: msg}
	}
	return &fleetmcp.ToolError{Code: "error", Message: text}
}

// decodeStructured decodes a tool result's structured content into out.
func decodeStructured(res *mcp.CallToolResult, out any) error {
	if res.StructuredContent == nil {
		return errors.New("the result has no structured content")
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

func contentText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
