package schemacheck

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var (
	//go:embed herdr-api.schema.json
	schema20 []byte
	//go:embed herdr-api.p22.schema.json
	schema22 []byte
)

// Protocols are the herdr protocols whose schema is embedded, oldest first;
// [Latest] is the last of them.
var Protocols = []int{20, 22}

// Latest is the newest protocol with an embedded schema.
const Latest = 22

// schemaFor returns the embedded schema of a protocol.
func schemaFor(protocol int) ([]byte, bool) {
	switch protocol {
	case 20:
		return schema20, true
	case 22:
		return schema22, true
	}
	return nil, false
}

// Validator checks herdr wire lines against the embedded schema of one
// protocol. It is safe for concurrent use.
type Validator struct {
	protocol     int
	request      *jsonschema.Schema
	success      *jsonschema.Schema
	errResp      *jsonschema.Schema
	event        *jsonschema.Schema
	subscription *jsonschema.Schema
}

// New compiles the embedded schema of protocol (one of [Protocols]).
func New(protocol int) (*Validator, error) {
	raw, ok := schemaFor(protocol)
	if !ok {
		return nil, fmt.Errorf("schemacheck: no schema for protocol %d (have %v)", protocol, Protocols)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schemacheck: parse embedded protocol-%d schema: %w", protocol, err)
	}
	if m, ok := doc.(map[string]any); ok {
		if p, ok := m["protocol"].(json.Number); !ok || p.String() != fmt.Sprint(protocol) {
			return nil, fmt.Errorf("schemacheck: embedded schema for protocol %d says protocol %v", protocol, m["protocol"])
		}
	}
	// schemaURL names the document for the compiler; the schema's own $refs
	// are fragment-only ("#/schemas/<name>/$defs/…"), so they resolve
	// against this document root.
	schemaURL := fmt.Sprintf("https://herdr.invalid/protocol-%d/herdr-api.schema.json", protocol)
	c, err := newCompiler(schemaURL, byTag(doc))
	if err != nil {
		return nil, fmt.Errorf("schemacheck: add embedded protocol-%d schema: %w", protocol, err)
	}
	v := &Validator{protocol: protocol}
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
			return nil, fmt.Errorf("schemacheck: compile protocol-%d schema %q: %w", protocol, s.name, err)
		}
		*s.dst = sch
	}
	return v, nil
}

// shared holds the process-wide Validator of each protocol; see Shared.
var shared = map[int]func() (*Validator, error){
	20: sync.OnceValues(func() (*Validator, error) { return New(20) }),
	22: sync.OnceValues(func() (*Validator, error) { return New(22) }),
}

// Shared returns the Validator of protocol, compiled on first use and reused
// afterwards. Compiling a schema takes a noticeable fraction of a second
// (more under the race detector); a Validator never changes after New, so
// one instance per protocol can serve every test and fake in the process.
func Shared(protocol int) (*Validator, error) {
	f, ok := shared[protocol]
	if !ok {
		return nil, fmt.Errorf("schemacheck: no schema for protocol %d (have %v)", protocol, Protocols)
	}
	return f()
}

// Protocol is the herdr protocol whose schema v checks.
func (v *Validator) Protocol() int { return v.protocol }

// Request validates a request line ({"id","method","params"}).
func (v *Validator) Request(line []byte) error { return v.validate("request", v.request, line) }

// Success validates a success response line ({"id","result":{"type",…}}).
func (v *Validator) Success(line []byte) error {
	return v.validate("success_response", v.success, line)
}

// Error validates an error response line ({"id","error":{"code","message"}}).
func (v *Validator) Error(line []byte) error { return v.validate("error_response", v.errResp, line) }

// Event validates a lifecycle event line as streamed by events.subscribe:
// {"event":"<snake_kind>","data":{"type":"<snake_kind>",…}}.
func (v *Validator) Event(line []byte) error { return v.validate("event", v.event, line) }

// SubscriptionEvent validates a per-pane subscription line:
// {"event":"pane.agent_status_changed"|…,"data":{…}} with untagged data.
func (v *Validator) SubscriptionEvent(line []byte) error {
	return v.validate("subscription_event", v.subscription, line)
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

func (v *Validator) validate(name string, sch *jsonschema.Schema, line []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(bytes.TrimRight(line, "\r\n")))
	if err != nil {
		return fmt.Errorf("schemacheck: %s line is not JSON: %w", name, err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("schemacheck: protocol-%d %s line %s: %w", v.protocol, name, abbreviate(line), err)
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
