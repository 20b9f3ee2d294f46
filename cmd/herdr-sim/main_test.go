package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lineWriter hands the first printed line to the test.
type lineWriter struct{ lines chan string }

func (w lineWriter) Write(b []byte) (int, error) {
	w.lines <- strings.TrimSpace(string(b))
	return len(b), nil
}

func TestRunServesUntilCancelled(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "herdr.sock")
	ctx, cancel := context.WithCancel(context.Background())
	out := lineWriter{lines: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--socket", sock, "--ready-delay", "0s"}, out) }()

	var printed string
	select {
	case printed = <-out.lines:
	case err := <-done:
		t.Fatalf("run ended early: %v", err)
	}
	if printed != sock {
		t.Fatalf("printed %q, want %q", printed, sock)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, `{"id":"1","method":"ping","params":{}}`+"\n")
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Result struct {
			Type     string `json:"type"`
			Protocol int    `json:"protocol"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &r); err != nil || r.Result.Type != "pong" || r.Result.Protocol != 22 {
		t.Fatalf("ping = %s (%v)", line, err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket %s still exists after shutdown (%v)", sock, err)
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "taken.sock")
	os.WriteFile(sock, nil, 0o600)
	for _, args := range [][]string{{"--ready-delay", "soon"}, {"extra"}, {"--socket", sock}} {
		if err := run(context.Background(), args, io.Discard); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
