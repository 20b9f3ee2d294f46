package validated

import (
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/internal/schemacheck"
)

// Start is herdrsim.Start with Options.Validator set to [Schema] (unless
// opts already sets a validator), so that the fake is checked against the
// schema of the protocol it speaks. opts is not modified.
func Start(opts *herdrsim.Options) (*herdrsim.Server, error) {
	var o herdrsim.Options
	if opts != nil {
		o = *opts
	}
	if o.Validator == nil {
		o.Validator = Schema()
	}
	return herdrsim.Start(&o)
}

// Schema returns a herdrsim.Validator that checks request lines against
// herdr's JSON Schema of the fake's own protocol: herdrsim.Start picks it
// through [herdrsim.ProtocolValidator] (protocol 22's schema for a fake of
// protocol 22 or newer, protocol 20's otherwise). Used on its own, outside a
// fake, it checks against protocol 22. Schemas are compiled once per
// process: for a fake, when it starts; used on its own, at first use.
// Compiling takes a good part of a second, which a fake's first request
// must not wait for: herdr answers its first request as fast as any other,
// and a benchmark timing whoever asks first would charge it to them. Should
// an embedded schema not compile, every request is refused with that error
// (and schemacheck's own tests fail).
func Schema() herdrsim.Validator { return schema{protocol: 0} }

// SchemaFor returns a herdrsim.Validator that checks against the schema of
// one protocol (20 or 22), whatever the fake speaks; the schema is compiled
// by this call.
func SchemaFor(protocol int) herdrsim.Validator { return compiled(protocol) }

// schema follows the fake's protocol; 0 means "not yet bound".
type schema struct{ protocol int }

func (s schema) Request(line []byte) error {
	return compiled(schemaProtocol(s.protocol)).Request(line)
}

func (schema) ForProtocol(protocol int) herdrsim.Validator {
	return compiled(schemaProtocol(protocol))
}

// schemaProtocol maps a fake's protocol to the embedded schema that
// describes it.
func schemaProtocol(protocol int) int {
	if protocol == 0 || protocol >= schemacheck.Latest {
		return schemacheck.Latest
	}
	return schemacheck.Protocols[0]
}

// bound checks against one protocol's compiled schema, or refuses every
// request with the error that compiling it gave.
type bound struct {
	v   *schemacheck.Validator
	err error
}

// compiled returns the validator of protocol's schema, compiling the schema
// now if nothing in the process has yet.
func compiled(protocol int) bound {
	v, err := schemacheck.Shared(protocol)
	return bound{v: v, err: err}
}

func (b bound) Request(line []byte) error {
	if b.err != nil {
		return b.err
	}
	return b.v.Request(line)
}
