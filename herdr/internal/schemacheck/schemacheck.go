package schemacheck

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed herdr-api.schema.json
var schemaJSON []byte

// schemaURL names the embedded document for the compiler; the schema's own
// $refs are fragment-only ("#/schemas/<name>/$defs/…"), so they resolve
// against this document root.
const schemaURL = "https://herdr.invalid/herdr-api.schema.json"

// Protocol is the herdr protocol version the embedded schema describes.
const Protocol = 20

// Validator checks herdr wire lines against the embedded schema. It is safe
// for concurrent use.
type Validator struct {
	request      *jsonschema.Schema
	success      *jsonschema.Schema
	errResp      *jsonschema.Schema
	event        *jsonschema.Schema
	subscription *jsonschema.Schema
}

// New compiles the embedded schema.
func New() (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("schemacheck: parse embedded schema: %w", err)
	}
	if m, ok := doc.(map[string]any); ok {
		if p, ok := m["protocol"].(json.Number); !ok || p.String() != fmt.Sprint(Protocol) {
			return nil, fmt.Errorf("schemacheck: embedded schema protocol is %v, want %d", m["protocol"], Protocol)
		}
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("schemacheck: add embedded schema: %w", err)
	}
	v := &Validator{}
	for _, s := range []struct {
		name string
		dst  **jsonschema.Schema
	}{
		{"request", &v.request},
		{"success_response", &v.success},
		{"error_response", &v.errResp},
		{"event", &v.event},
		{"subscription_event", &v.subscription},
	} {
		sch, err := c.Compile(schemaURL + "#/schemas/" + s.name)
		if err != nil {
			return nil, fmt.Errorf("schemacheck: compile schema %q: %w", s.name, err)
		}
		*s.dst = sch
	}
	return v, nil
}

// shared is the process-wide Validator; see Shared.
var shared = sync.OnceValues(New)

// Shared returns a Validator compiled on first use and reused afterwards.
// Compiling the schema takes a noticeable fraction of a second (more under
// the race detector); a Validator never changes after New, so one instance
// can serve every test and fake in the process.
func Shared() (*Validator, error) { return shared() }

// Request validates a request line ({"id","method","params"}).
func (v *Validator) Request(line []byte) error { return validate("request", v.request, line) }

// Success validates a success response line ({"id","result":{"type",…}}).
func (v *Validator) Success(line []byte) error { return validate("success_response", v.success, line) }

// Error validates an error response line ({"id","error":{"code","message"}}).
func (v *Validator) Error(line []byte) error { return validate("error_response", v.errResp, line) }

// Event validates a lifecycle event line as streamed by events.subscribe:
// {"event":"<snake_kind>","data":{"type":"<snake_kind>",…}}.
func (v *Validator) Event(line []byte) error { return validate("event", v.event, line) }

// SubscriptionEvent validates a per-pane subscription line:
// {"event":"pane.agent_status_changed"|…,"data":{…}} with untagged data.
func (v *Validator) SubscriptionEvent(line []byte) error {
	return validate("subscription_event", v.subscription, line)
}

// Response validates a response line as a success response when it has a
// "result" member and as an error response otherwise.
func (v *Validator) Response(line []byte) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(line, &probe); err != nil {
		return fmt.Errorf("schemacheck: response is not a JSON object: %w", err)
	}
	if _, ok := probe["result"]; ok {
		return v.Success(line)
	}
	return v.Error(line)
}

// StreamLine validates one line read from an events.subscribe stream after
// the ack: a dot in the "event" name selects the per-pane subscription
// schema, otherwise the lifecycle event schema. A line with an "error" member
// (a setup failure) is validated as an error response.
func (v *Validator) StreamLine(line []byte) error {
	var probe struct {
		Event *string          `json:"event"`
		Error *json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &probe); err != nil {
		return fmt.Errorf("schemacheck: stream line is not a JSON object: %w", err)
	}
	switch {
	case probe.Error != nil:
		return v.Error(line)
	case probe.Event != nil && bytes.ContainsRune([]byte(*probe.Event), '.'):
		return v.SubscriptionEvent(line)
	default:
		return v.Event(line)
	}
}

func validate(name string, sch *jsonschema.Schema, line []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(bytes.TrimRight(line, "\r\n")))
	if err != nil {
		return fmt.Errorf("schemacheck: %s line is not JSON: %w", name, err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("schemacheck: %s line %s: %w", name, abbreviate(line), err)
	}
	return nil
}

func abbreviate(line []byte) string {
	const max = 200
	line = bytes.TrimRight(line, "\r\n")
	if len(line) > max {
		return string(line[:max]) + "…"
	}
	return string(line)
}
