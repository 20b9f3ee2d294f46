package herdrsim_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
)

// newMemoryHarness starts an in-memory fake on the real clock: inside a
// synctest bubble that clock is the bubble's virtual one.
func newMemoryHarness(t *testing.T, opts *herdrsim.Options) *harness {
	t.Helper()
	var o herdrsim.Options
	if opts != nil {
		o = *opts
	}
	o.InMemory = true
	return startHarness(t, o, nil)
}

func TestInMemory_HasNoSocket(t *testing.T) {
	t.Parallel()
	h := newMemoryHarness(t, nil)
	if p := h.srv.SocketPath(); p != "" {
		t.Errorf("SocketPath = %q in memory, want none", p)
	}
	if _, err := herdrsim.Start(&herdrsim.Options{InMemory: true, SocketPath: "/tmp/x.sock"}); err == nil {
		t.Error("Start accepted both InMemory and a SocketPath")
	}
}

// The in-memory connection is served by the socket's code: one request per
// connection, schema checks, herdr's invalid_request, streams.
func TestInMemory_ServesLikeTheSocket(t *testing.T) {
	t.Parallel()
	h := newMemoryHarness(t, &herdrsim.Options{Protocol: 20, NoReplay: true})
	if res := h.ok("ping", map[string]any{}); res["type"] != "pong" || res["protocol"] != float64(20) {
		t.Fatalf("ping = %v", res)
	}

	id, first := h.request("ping", map[string]any{})
	_, second := h.request("workspace.create", map[string]any{})
	c := h.dial()
	if _, err := c.Write(append(append(append(first, '\n'), second...), '\n')); err != nil {
		t.Fatal(err)
	}
	lc := &lineConn{h: h, Conn: c, r: newReader(c)}
	if line, ok := lc.next(); !ok || h.response(line).ID != id {
		t.Fatalf("response %s, want the pong for %s", line, id)
	}
	lc.eof()
	if got := h.srv.Calls()["workspace.create"]; got != 0 {
		t.Errorf("the second line of a connection was run (%d workspace.create)", got)
	}

	c = h.dial()
	c.Write([]byte(`{"id":"a","method":"pane.get","params":{}}` + "\n"))
	lc = &lineConn{h: h, Conn: c, r: newReader(c)}
	line, ok := lc.next()
	if r := h.response(line); !ok || r.ID != "" || r.Error == nil || r.Error.Code != "invalid_request" {
		t.Fatalf("a request the schema rejects got %s, want invalid_request with an empty id", line)
	}

	s := h.subscribe(sub("workspace.created"))
	wsID, _ := h.workspace(nil)
	if ev := s.event(); ev.Event != "workspace_created" || str(ev.Data, "workspace", "workspace_id") != wsID {
		t.Errorf("stream got %s, want workspace_created for %s", ev.raw, wsID)
	}
}

// Stop and Restart model herdr going down and up: streams drop, Dial is
// refused like a connect to a dead socket, and the model survives.
func TestInMemory_StopRefusesDialRestartServesTheModel(t *testing.T) {
	t.Parallel()
	h := newMemoryHarness(t, &herdrsim.Options{NoReplay: true})
	wsID, _ := h.workspace(nil)
	s := h.subscribe(sub("workspace.created"))
	if err := h.srv.Stop(); err != nil {
		t.Fatal(err)
	}
	s.eof()
	refused := func(when string) {
		t.Helper()
		_, err := h.srv.Dial(context.Background())
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("Dial %s = %v, want a dial *net.OpError matching ECONNREFUSED", when, err)
		}
	}
	refused("while stopped")
	if err := h.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Restart(); err == nil {
		t.Error("Restart while serving succeeded")
	}
	ws := h.ok("workspace.list", map[string]any{})["workspaces"].([]any)
	if len(ws) != 1 || str(ws[0].(map[string]any), "workspace_id") != wsID {
		t.Errorf("workspaces after Restart = %v, want %s kept", ws, wsID)
	}
	if err := h.srv.Close(); err != nil {
		t.Fatal(err)
	}
	refused("after Close")
}

// In a synctest bubble every goroutine of the in-memory fake blocks
// durably, so virtual time moves: the fake's 3 s readiness passes without
// sleeping, and a long call parked on it is answered then, not before.
func TestInMemory_RunsInASynctestBubble(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newMemoryHarness(t, &herdrsim.Options{ReadyDelay: 3 * time.Second})
		start := time.Now()
		_, pane := h.workspace(nil)
		h.agent("w1", pane)
		_, wait := h.send("agent.wait", map[string]any{"target": "w1", "until": []string{"idle"}})
		if err := h.srv.WaitParked(t.Context(), "agent.wait", 1); err != nil {
			t.Fatal(err)
		}
		answered := make(chan []byte, 1)
		go func() {
			line, _ := wait.r.ReadBytes('\n')
			answered <- bytes.TrimSuffix(line, []byte("\n"))
		}()
		time.Sleep(3*time.Second - time.Nanosecond)
		synctest.Wait()
		select {
		case line := <-answered:
			t.Fatalf("agent.wait answered %s before the agent was ready", line)
		default:
		}
		if a := h.ok("agent.get", map[string]any{"target": pane})["agent"].(map[string]any); a["launch_pending"] != true {
			t.Fatalf("agent.get just before ReadyDelay = %v, want launch_pending", a)
		}
		time.Sleep(time.Nanosecond)
		line := <-answered
		if r := h.response(line); str(r.Result, "agent", "agent_status") != "idle" {
			t.Fatalf("agent.wait = %s, want the agent idle", line)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("virtual time passed %v, want exactly the 3 s ReadyDelay", d)
		}
	})
}
