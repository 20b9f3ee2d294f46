package tokens

import (
	"fmt"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/heaptest"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// BenchmarkRegistry_RetainedPerMember reports the heap a registry keeps
// for a fleet of 1000 members, each with its pane's token minted and bound
// and its next one minted ahead (Mint), on a state database (its book of
// record sizes counted too), per member: B/member.
func BenchmarkRegistry_RetainedPerMember(b *testing.B) {
	const members = 1000
	names, uids, panes, terms := make([]string, members), make([]string, members), make([]string, members), make([]string, members)
	for i := range members {
		names[i], uids[i] = fmt.Sprintf("member-%04d", i), fmt.Sprintf("3f1c9a52-8d4e-4b7a-9c21-%012x", i)
		panes[i], terms[i] = fmt.Sprintf("w1:p%d", i+2), fmt.Sprintf("term_18a2b3c4d5%06x", i)
	}
	var retained uint64
	for b.Loop() {
		dir := b.TempDir()
		db, err := statedb.Open(statedir.At(dir).StateDB(), nil)
		if err != nil {
			b.Fatal(err)
		}
		before := heaptest.Live()
		r, err := Open(dir, db, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := range members {
			_, id, err := r.Mint(names[i], uids[i])
			if err != nil {
				b.Fatal(err)
			}
			if err := r.Bind(id, panes[i], terms[i]); err != nil {
				b.Fatal(err)
			}
		}
		after := heaptest.Live()
		if len(r.entries) != members || r.spares.Len() != members {
			b.Fatalf("%d tokens handed out and %d minted ahead, want %d each", len(r.entries), r.spares.Len(), members)
		}
		retained += after - before
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(retained)/float64(b.N)/members, "B/member")
}
