package validated

import (
	"github.com/fleetd-dev/fleetd/herdr/herdrtest"
	"github.com/fleetd-dev/fleetd/herdr/internal/schemacheck"
)

// Start is herdrtest.Start with Options.Validator set to [Schema] (unless
// opts already sets a validator). opts is not modified.
func Start(opts *herdrtest.Options) (*herdrtest.Server, error) {
	var o herdrtest.Options
	if opts != nil {
		o = *opts
	}
	if o.Validator == nil {
		o.Validator = Schema()
	}
	return herdrtest.Start(&o)
}

// Schema returns a herdrtest.Validator that checks request lines against
// herdr's JSON Schema. The schema is compiled once per process, on first
// use; should the embedded schema not compile, every request is refused
// with that error (and schemacheck's own tests fail).
func Schema() herdrtest.Validator { return schema{} }

type schema struct{}

func (schema) Request(line []byte) error {
	v, err := schemacheck.Shared()
	if err != nil {
		return err
	}
	return v.Request(line)
}
