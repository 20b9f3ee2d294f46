package herdr

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeResponseThrice is decodeResponse as it was before it decoded a
// line once: the envelope with a copy of the result's bytes, then the
// type tag, then the result. decodeResponse must answer every line as it
// does.
func decodeResponseThrice(method string, line []byte, wantType string, result any) (string, error) {
	bad := func(err error) (string, error) {
		return ReasonBadResponse, &TransportError{Method: method, Reason: ReasonBadResponse, Err: err}
	}
	type response struct { // named as decodeResponse's, which errors name
		ID     string          `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return bad(fmt.Errorf("decode response %.200q: %w", line, err))
	}
	if resp.Error != nil {
		return resp.Error.Code, &Error{Method: method, Code: resp.Error.Code, Message: resp.Error.Message}
	}
	if len(resp.Result) == 0 || string(resp.Result) == "null" {
		return bad(fmt.Errorf("response has neither result nor error: %.200q", line))
	}
	var tag struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(resp.Result, &tag); err != nil {
		return bad(fmt.Errorf("decode result: %w", err))
	}
	if tag.Type != wantType {
		return bad(fmt.Errorf("result type %q, want %q", tag.Type, wantType))
	}
	if result != nil {
		if err := json.Unmarshal(resp.Result, result); err != nil {
			return bad(fmt.Errorf("decode %s result: %w", wantType, err))
		}
	}
	return "ok", nil
}

// TestDecodeResponse_AnswersAsTheThreeDecodings: decoding an answer once
// reports the same code, the same error and the same result as decoding
// it three times did, for good answers and for every kind of bad one.
func TestDecodeResponse_AnswersAsTheThreeDecodings(t *testing.T) {
	lines := append([]string{
		`{"id":"1","result":5}`,
		`{"id":"1","result":"pong"}`,
		`{"id":"1","result":[]}`,
		`{"id":"1","result":{"type":5}}`,
		`{"id":"1","result":{"type":"pong","protocol":"twenty"}}`,
		`{"id":"1","result":{"type":"pong"},"error":{"code":"busy","message":"later"}}`,
		`{"id":"1","error":{"code":"busy","message":"later"},"result":{"type":"pong","protocol":"x"}}`,
		`{"id":"1","result":{"type":"pong"},"result":null}`,
		`{"id":"1","result":null,"result":{"type":"pong","version":"0.9.3"}}`,
		`{"id":"1","result":{"type":"tab_closed"},"result":{"type":"pong"}}`,
		`{"id":7,"result":{"type":"pong"}}`,
		`{"id":"1","result":{"type":"pong"},"error":5}`,
		`{"id":"1","RESULT":{"type":"pong","version":"0.9.3"}}`,
		`{"id":"1","result":{"type":"pong"}} trailing`,
		`null`,
		``,
	}, responseSeeds...)
	for _, line := range lines {
		for _, want := range []string{"agent_info", "pong", "tab_created", "tab_closed"} {
			for _, withResult := range []bool{true, false} {
				newResult := func() any {
					if !withResult {
						return nil
					}
					switch want {
					case "agent_info":
						return new(agentResult)
					case "pong":
						return new(Pong)
					case "tab_created":
						return new(TabCreated)
					}
					return new(struct{ Type string })
				}
				gotResult, wantResult := newResult(), newResult()
				gotCode, gotErr := decodeResponse("test", []byte(line), want, gotResult)
				wantCode, wantErr := decodeResponseThrice("test", []byte(line), want, wantResult)
				if gotCode != wantCode || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Errorf("%s as %s: got %q, %v; want %q, %v", line, want, gotCode, gotErr, wantCode, wantErr)
				}
				if wantErr == nil {
					if diff := cmp.Diff(wantResult, gotResult); diff != "" {
						t.Errorf("%s as %s: result (-want +got):\n%s", line, want, diff)
					}
				}
			}
		}
	}
}
