package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/mcp"
)

// members deleted through the REST API go at once however many they are;
// most members' files removed by hand at once are held — listed by GET
// /prune, still running — until POST /prune/confirm prunes them.
func TestPrune_DeletesThroughTheAPIPassFilesRemovedAtOnceAreHeld(t *testing.T) {
	t.Parallel()
	// The three files removed below are one change only if the directory
	// is read once after all three: a second's quiet, not 100 ms, so that
	// a loaded machine's pause between two removals does not split them.
	f := startFleetConfig(t, "", Config{ManifestsDebounce: time.Second, Messaging: &messaging.Options{PickupGrace: 10 * time.Minute}})
	for _, n := range []string{"a", "b", "c", "d"} {
		f.spawn(n)
	}
	for _, n := range []string{"a", "b", "c"} {
		if code, body := do(t, "DELETE", f.info.URL+"/members/"+n, f.token, ""); code != http.StatusOK {
			t.Fatalf("DELETE /members/%s = %d %s", n, code, body)
		}
	}
	if err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool { return len(ms) == 1 }); err != nil {
		t.Fatalf("three members deleted through the API: %v", err)
	}
	held := func() []string {
		code, body := do(t, "GET", f.info.URL+"/prune", f.token, "")
		var list mcp.PruneHoldList
		if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("GET /prune = %d %s", code, body)
		}
		var names []string
		for _, h := range list.Items {
			names = append(names, h.Member)
		}
		return names
	}
	if got := held(); len(got) != 0 {
		t.Fatalf("held after deletes through the API: %v", got)
	}

	for _, n := range []string{"e", "f", "g"} {
		f.spawn(n)
	}
	panes := map[string]string{}
	_ = f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
		for _, m := range ms {
			panes[m.Name] = m.Status.PaneID
		}
		return true
	})
	for _, n := range []string{"e", "f", "g"} {
		if err := os.Remove(filepath.Join(f.manifests, n+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
		n := 0
		for _, m := range ms {
			for _, c := range m.Status.Conditions {
				if c.Type == v1alpha1.ConditionManifestValid && c.Reason == v1alpha1.ReasonPruneHeld {
					n++
				}
			}
		}
		return n == 3
	}); err != nil {
		t.Fatalf("three of four members' files removed at once: not held: %v", err)
	}
	if got := held(); !slices.Equal(got, []string{"e", "f", "g"}) {
		t.Errorf("GET /prune lists %v, want e, f and g", got)
	}
	for _, n := range []string{"e", "f", "g"} {
		if _, ok := f.sim.Pane(panes[n]); !ok {
			t.Errorf("%s's pane %s closed while its prune is held", n, panes[n])
		}
	}
	if code, body := do(t, "POST", f.info.URL+"/prune/confirm", f.token, ""); code != http.StatusOK {
		t.Fatalf("POST /prune/confirm = %d %s", code, body)
	}
	if err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool { return len(ms) == 1 && ms[0].Name == "d" }); err != nil {
		t.Fatalf("after the confirmation: %v", err)
	}
}
