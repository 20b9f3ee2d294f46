package validated

import (
	"testing"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
)

// herdrsim.Start binds the validator with ForProtocol: the schema is
// compiled then, so that the fake's first request is not the one that waits
// for it.
func TestForProtocol_CompilesTheSchemaBeforeAnyRequest(t *testing.T) {
	for _, p := range []int{herdrsim.Protocol20, herdrsim.DefaultProtocol} {
		v := Schema().(herdrsim.ProtocolValidator).ForProtocol(p)
		b, ok := v.(bound)
		if !ok || b.err != nil || b.v == nil {
			t.Errorf("ForProtocol(%d) = %#v, want the compiled schema", p, v)
		}
	}
	if b, ok := SchemaFor(herdrsim.Protocol20).(bound); !ok || b.v == nil {
		t.Errorf("SchemaFor(20) did not compile the schema")
	}
}
