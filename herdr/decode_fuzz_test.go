package herdr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Seeds shared by the fuzz targets: lines shaped like herdr's, and the
// malformed kinds a broken or hostile peer could send. testdata/fuzz holds
// more.
var (
	responseSeeds = []string{
		`{"id":"1","result":{"type":"agent_info","agent":` + agentJSON + `}}`,
		`{"id":"1","result":{"type":"pong","version":"0.8.2","protocol":20}}`,
		`{"id":"1","result":{"type":"tab_created","tab":` + tabJSON + `,"root_pane":` + paneJSON + `}}`,
		`{"id":"","error":{"code":"invalid_request","message":"invalid request: missing field pane_id"}}`,
		`{"id":"1","result":null}`,
		`{"id":"1","result":{"type":"agent_info","agent":{"interactive_ready":"yes"}}}`,
		`{"id":"1","result":{"type":"pane_info","pa`,
		`{"id":"1"}`,
		`{"id":"1:sub:0:probe","error":{"code":"pane_not_found","message":"pane w1:p9 not found"}}`,
		`{"id":"2","result":{"type":"pong","version":"0.9.3","protocol":22}}`,
		`[]`,
		"\xff\xfe",
	}
	eventSeeds = []string{
		`{"event":"pane_created","data":{"type":"pane_created","pane":` + paneJSON + `}}`,
		`{"event":"pane.agent_status_changed","data":{"pane_id":"w1:p2","workspace_id":"w1","agent_status":"working","agent":"claude"}}`,
		`{"event":"tab_closed","data":{"type":"tab_closed","tab_id":"w1:t2","workspace_id":"w1"}}`,
		`{"event":"pane_agent_detected","data":{"type":"pane_agent_detected","pane_id":"w1:p2","agent":"claude","released":true,"final_status":"done"}}`,
		`{"event":"pane.output_matched","data":{"pane_id":"w1:p2","matched_line":"PASS","read":` + readJSON + `}}`,
		`{"event":"workspace_reordered","data":{"type":"workspace_reordered","workspace_ids":["w2","w1"]}}`,
		`{"event":"pane_moved","data":{"pane":7}}`,
		`{"event":"future_kind","data":{"pane":7}}`,
		`{"id":"1:sub:0:probe","error":{"code":"pane_not_found","message":"pane w1:p9 not found"}}`,
		`{"event":"","data":{}}`,
		`{"event":"pane_closed","data":null}`,
	}
)

// checkCallError checks the client's promise about failures: herdr's error
// envelope is an *Error carrying its code, anything else a *TransportError
// matching ErrUnavailable.
func checkCallError(t *testing.T, code string, err error) {
	t.Helper()
	if err == nil {
		if code != "ok" {
			t.Fatalf("success reported as code %q", code)
		}
		return
	}
	var he *Error
	var te *TransportError
	switch {
	case errors.As(err, &he):
		if he.Code != code {
			t.Fatalf("herdr error code %q reported as %q", he.Code, code)
		}
	case errors.As(err, &te):
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("transport error %v does not match ErrUnavailable", err)
		}
	default:
		t.Fatalf("error %v (%T) is neither *Error nor *TransportError", err, err)
	}
}

// FuzzDecodeResponse feeds arbitrary response lines to the decoder of every
// call's result: it must classify each without panicking, as the one pass
// it makes over the line (the envelope and the result together) would have
// as the three passes it replaced (decodeApart: the envelope with the
// result raw, the result's type, then the result) — the same code and
// class of error for every line, and the same result when both succeed,
// except for a line naming "result" more than once, which the one pass
// decodes into the caller's value twice and the three passes took the last
// of.
func FuzzDecodeResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		check := func(want string, onePass typedResult, apart any, got, wantValue func() any) {
			t.Helper()
			code, err := decodeResponse("fuzz", line, want, onePass)
			checkCallError(t, code, err)
			wantCode, wantErr := decodeApart("fuzz", line, want, apart)
			var he, wantHe *Error
			if code != wantCode || (err == nil) != (wantErr == nil) || errors.As(err, &he) != errors.As(wantErr, &wantHe) {
				t.Fatalf("%s: one pass (%q, %v), three passes (%q, %v)", want, code, err, wantCode, wantErr)
			}
			if err == nil && onePass != nil && bytes.Count(bytes.ToLower(line), []byte(`"result"`)) == 1 {
				if diff := cmp.Diff(wantValue(), got()); diff != "" {
					t.Fatalf("%s: one pass decoded (-three passes +one pass):\n%s", want, diff)
				}
			}
		}
		var agent, agentApart agentResult
		check("agent_info", &agent, &agentApart, func() any { return agent.Agent }, func() any { return agentApart.Agent })
		var pong struct {
			resultTag
			Pong
		}
		var pongApart Pong
		check("pong", &pong, &pongApart, func() any { return pong.Pong }, func() any { return pongApart })
		var tab struct {
			resultTag
			TabCreated
		}
		var tabApart TabCreated
		check("tab_created", &tab, &tabApart, func() any { return tab.TabCreated }, func() any { return tabApart })
		check("tab_closed", nil, nil, nil, nil)
	})
}

// decodeApart is the decoder decodeResponse replaced: the envelope with the
// result raw, then the result's type, then (into result, if any) the
// result.
func decodeApart(method string, line []byte, wantType string, result any) (string, error) {
	bad := func(err error) (string, error) {
		return ReasonBadResponse, &TransportError{Method: method, Reason: ReasonBadResponse, Err: err}
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return bad(err)
	}
	if resp.Error != nil {
		return resp.Error.Code, &Error{Method: method, Code: resp.Error.Code, Message: resp.Error.Message}
	}
	if len(resp.Result) == 0 || string(resp.Result) == "null" {
		return bad(errors.New("neither result nor error"))
	}
	var tag struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(resp.Result, &tag); err != nil {
		return bad(err)
	}
	if tag.Type != wantType {
		return bad(errors.New("result type"))
	}
	if result != nil {
		if err := json.Unmarshal(resp.Result, result); err != nil {
			return bad(err)
		}
	}
	return "ok", nil
}

// FuzzDecodeEvent feeds arbitrary lines to the subscription stream's
// decoder: an event comes out with its kind, name and payload, or the line
// ends the stream with an error matching ErrStreamDropped.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range eventSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := decodeStreamLine(line)
		if err != nil {
			if !errors.Is(err, ErrStreamDropped) {
				t.Fatalf("stream line error %v does not match ErrStreamDropped", err)
			}
			return
		}
		if ev.Kind == "" || ev.Name == "" || ev.Data == nil {
			t.Fatalf("decoded event without kind, name or payload: %+v", ev)
		}
	})
}

// fuzzPeer serves one connection as a misbehaving herdr: it reads the
// request line, writes out(the request's id), and closes. done is closed
// when it has.
func fuzzPeer(out func(id string) []byte) (client net.Conn, done <-chan struct{}) {
	client, server := net.Pipe()
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer server.Close()
		line, err := bufio.NewReader(server).ReadBytes('\n')
		if err != nil {
			return
		}
		var req struct{ ID string }
		json.Unmarshal(line, &req)
		server.Write(out(req.ID)) // the client may hang up first; that is its right
	}()
	return client, ch
}

// FuzzClientExchange runs whole calls against a peer that answers with
// arbitrary bytes and closes: a short call and an event stream must end —
// no hang — with a result or a classified error, and a stream the peer
// closed must report ErrStreamDropped.
func FuzzClientExchange(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s + "\n"))
	}
	for _, s := range eventSeeds {
		f.Add([]byte(s + "\n" + s + "\n"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var peers []<-chan struct{}
		var prefix func(id string) []byte
		c := New(&Options{SocketPath: "fuzz.sock", Dial: func(context.Context) (net.Conn, error) {
			pre := prefix // read here, in the caller's goroutine
			conn, done := fuzzPeer(func(id string) []byte {
				if pre == nil {
					return data
				}
				return append(pre(id), data...)
			})
			peers = append(peers, done)
			return conn, nil
		}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()

		code := "ok"
		var err error
		c.observe = func(_, c string, _ time.Duration) { code = c }
		_, err = c.GetAgent(ctx, "w1:p2")
		if ctx.Err() != nil {
			t.Fatal("agent.get hung on the peer's answer")
		}
		checkCallError(t, code, err)

		prefix = func(id string) []byte {
			return []byte(`{"id":"` + id + `","result":` + ackResult + "}\n")
		}
		stream, err := c.Subscribe(ctx, []Subscription{{Type: SubPaneClosed}})
		if err != nil {
			t.Fatalf("subscribe with a good ack: %v", err)
		}
		for ev := range stream.Events() {
			if ev.Kind == "" {
				t.Fatalf("stream delivered an event without kind: %+v", ev)
			}
		}
		if ctx.Err() != nil {
			t.Fatal("event stream hung on the peer's lines")
		}
		if err := stream.Err(); !errors.Is(err, ErrStreamDropped) {
			t.Fatalf("stream closed by herdr ended with %v, want ErrStreamDropped", err)
		}
		stream.Close()
		for _, done := range peers {
			<-done
		}
	})
}
