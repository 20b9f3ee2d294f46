package mcp

import "github.com/prometheus/client_golang/prometheus"

// newToolCalls is fleetd_mcp_tool_calls_total{tool,outcome}: outcome is ok
// or the error's code word; tool is one of the eleven names or "unknown".
// Every tool starts at zero for ok, so a scrape shows the full set.
func newToolCalls() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetd_mcp_tool_calls_total",
		Help: "MCP tool calls by tool and outcome (ok or the error code).",
	}, []string{"tool", "outcome"})
	for _, t := range toolNames {
		c.WithLabelValues(t, "ok")
	}
	return c
}
