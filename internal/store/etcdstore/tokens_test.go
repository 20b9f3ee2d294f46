package etcdstore

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The first claim of the fleet's primary token wins; a later one gets the
// winner's hash; every store reads it from its watch, follows a change and
// keeps the last good hash when the key goes or turns bad.
func TestStore_ClaimPrimaryTokenOnceAndFollowIt(t *testing.T) {
	a := startNode(t, &Options{Node: "a"})
	b := startNode(t, &Options{Node: "b"})
	ctx := context.Background()
	first := FleetToken{SHA256: strings.Repeat("ab", 32), Node: "a"}
	second := FleetToken{SHA256: strings.Repeat("cd", 32), Node: "b"}
	if got, err := a.st.ClaimPrimaryToken(ctx, first); err != nil || got != first {
		t.Fatalf("first claim: %+v %v, want it won", got, err)
	}
	if got, err := b.st.ClaimPrimaryToken(ctx, second); err != nil || got != first {
		t.Fatalf("second claim: %+v %v, want the first's", got, err)
	}
	tokenUntil := func(st *Store, want FleetToken) {
		t.Helper()
		deadline := time.NewTimer(waitLimit)
		defer deadline.Stop()
		for {
			ch := st.PrimaryTokenChanged()
			if got, ok := st.PrimaryToken(); ok && got == want {
				return
			}
			select {
			case <-ch:
			case <-deadline.C:
				got, _ := st.PrimaryToken()
				t.Fatalf("primary token %+v, want %+v", got, want)
			}
		}
	}
	tokenUntil(a.st, first)
	tokenUntil(b.st, first)

	key := prefix(t) + "/tokens/primary"
	upper := `{"sha256":"` + strings.Repeat("EF", 32) + `","node":"b"}`
	if _, err := a.cli.Put(ctx, key, upper); err != nil {
		t.Fatal(err)
	}
	changed := FleetToken{SHA256: strings.Repeat("ef", 32), Node: "b"}
	tokenUntil(b.st, changed)
	for _, bad := range []string{`{"sha256":"short","node":"b"}`, `{"sha256":"` + strings.Repeat("ab", 32) + `","node":"b","token":"x"}`} {
		if _, err := a.cli.Put(ctx, key, bad); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	// A key written after them, once read, shows that the watch read the
	// bad values and the delete: the last good hash stays in effect.
	if _, err := a.cli.Put(ctx, prefix(t)+"/status/marker", `{"node":"a","memberUID":"u","status":{}}`); err != nil {
		t.Fatal(err)
	}
	statusUntil(t, b.st, "marker", "read", func(_ PublishedStatus, ok bool) bool { return ok })
	if got, _ := b.st.PrimaryToken(); got != changed {
		t.Errorf("after bad values and a delete: %+v, want %+v", got, changed)
	}
	// With the key gone, a claim wins again.
	if got, err := a.st.ClaimPrimaryToken(ctx, second); err != nil || got != second {
		t.Fatalf("claim after the delete: %+v %v", got, err)
	}
	tokenUntil(b.st, second)
}
