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
// process, on first use; should an embedded schema not compile, every
// request is refused with that error (and schemacheck's own tests fail).
func Schema() herdrsim.Validator { return schema{protocol: 0} }

// SchemaFor returns a herdrsim.Validator that checks against the schema of
// one protocol (20 or 22), whatever the fake speaks.
func SchemaFor(protocol int) herdrsim.Validator { return fixed{protocol} }

// schema follows the fake's protocol; 0 means "not yet bound".
type schema struct{ protocol int }

func (s schema) Request(line []byte) error { return fixed{schemaProtocol(s.protocol)}.Request(line) }

func (schema) ForProtocol(protocol int) herdrsim.Validator {
	return fixed{schemaProtocol(protocol)}
}

// schemaProtocol maps a fake's protocol to the embedded schema that
// describes it.
func schemaProtocol(protocol int) int {
	if protocol == 0 || protocol >= schemacheck.Latest {
		return schemacheck.Latest
	}
	return schemacheck.Protocols[0]
}

type fixed struct{ protocol int }

func (f fixed) Request(line []byte) error {
	v, err := schemacheck.Shared(f.protocol)
	if err != nil {
		return err
	}
	return v.Request(line)
}
