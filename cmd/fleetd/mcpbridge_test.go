package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runBridgeCLI runs `fleetd args…` as runCLI does, with stdin and stdout
// wired to the given pipe ends, and delivers the exit code and stderr on the
// returned channel when the command returns.
func runBridgeCLI(stdin io.Reader, stdout io.Writer, args ...string) <-chan bridgeExit {
	done := make(chan bridgeExit, 1)
	go func() {
		var errOut bytes.Buffer
		root := newRootCmd()
		root.SetArgs(args)
		root.SetIn(stdin)
		root.SetOut(stdout)
		root.SetErr(&errOut)
		err := root.Execute()
		code := 0
		var ee *exitError
		switch {
		case errors.As(err, &ee):
			code = ee.code
		case err != nil:
			errOut.WriteString("fleetd: " + err.Error() + "\n")
			code = 1
		}
		done <- bridgeExit{code, errOut.String()}
	}()
	return done
}

type bridgeExit struct {
	code   int
	stderr string
}

func waitExit(t *testing.T, done <-chan bridgeExit) bridgeExit {
	t.Helper()
	select {
	case e := <-done:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("fleetd mcp-bridge did not exit")
		return bridgeExit{}
	}
}

// testGateway serves one go-sdk MCP server with a "greet" tool behind a
// bearer check.
func testGateway(t *testing.T, token string) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "gateway", Version: "test"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Name string `json:"name"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func TestMCPBridge_RelaysAndExitsZeroWhenStdinCloses(t *testing.T) {
	const token = "bridge-cli-token-4f2a9c"
	url := testGateway(t, token)
	t.Setenv("WORKER_TOKEN", token)

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	done := runBridgeCLI(inR, outW, "mcp-bridge", "--url", url, "--token-env", "WORKER_TOKEN")

	client := mcp.NewClient(&mcp.Implementation{Name: "harness", Version: "test"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect through fleetd mcp-bridge: %v", err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "primary"}})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "hello primary" {
		t.Errorf("tool result = %q, want %q", got, "hello primary")
	}
	cs.Close() // closes the bridge's stdin
	if e := waitExit(t, done); e.code != 0 {
		t.Errorf("exit %d after stdin closed, want 0; stderr:\n%s", e.code, e.stderr)
	}
}

func TestMCPBridge_Failures(t *testing.T) {
	const token = "bridge-cli-token-4f2a9c"
	url := testGateway(t, token)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/mcp"
	dead.Close()

	tests := []struct {
		name  string
		env   string // value of $FLEETD_TOKEN
		url   string
		wants []string
	}{
		{"token variable unset", "", url, []string{"$FLEETD_TOKEN is empty or unset"}},
		{"token refused", "not-the-token-77", url, []string{"refused the token in $FLEETD_TOKEN"}},
		{"gateway unreachable", token, deadURL, []string{"cannot reach the gateway at " + deadURL}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("FLEETD_TOKEN", tt.env)
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			t.Cleanup(func() { inW.Close(); outR.Close() })
			done := runBridgeCLI(inR, outW, "mcp-bridge", "--url", tt.url)

			if tt.env != "" {
				// The harness's first message is what meets the gateway.
				client := mcp.NewClient(&mcp.Implementation{Name: "harness", Version: "test"}, nil)
				transport := &mcp.IOTransport{Reader: outR, Writer: inW}
				if _, err := client.Connect(context.Background(), transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}); err == nil {
					t.Fatal("connect succeeded")
				}
			}
			e := waitExit(t, done)
			if e.code != 1 {
				t.Errorf("exit %d, want 1", e.code)
			}
			for _, want := range tt.wants {
				if !strings.Contains(e.stderr, want) {
					t.Errorf("stderr = %q, want it to contain %q", e.stderr, want)
				}
			}
			if tt.env != "" && strings.Contains(e.stderr, tt.env) {
				t.Errorf("stderr contains the token: %q", e.stderr)
			}
		})
	}
}
