package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// Worker tokens that no owned pane holds — a pane whose ownership record
// was lost (its tab is closed as an orphan), a launch that never got its
// pane recorded — stop resolving when fleetd starts; the tokens of the
// panes it runs keep working.
func TestRun_RevokesTokensNoOwnedPaneHolds(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	db, err := statedb.Open(statedir.At(stateDir).StateDB(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg, err := tokens.Open(stateDir, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	lost, id, err := reg.Mint("ghost", "uid-ghost")
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Bind(id, "w1:p9", "term_9"); err != nil {
		t.Fatal(err)
	}
	unbound, _, err := reg.Mint("reviewer", "uid-old")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil { // an earlier fleetd, stopped
		t.Fatal(err)
	}
	info, _ := startDaemon(t, stateDir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pane string
	if err := info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		for _, m := range ms {
			if m.Name == "reviewer" && m.Status.Phase == v1alpha1.PhaseReady {
				pane = m.Status.PaneID
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal("reviewer not Ready")
	}
	for name, tok := range map[string]string{"lost pane's": lost, "unrecorded launch's": unbound} {
		if code := postMCP(t, info.MCPURL, tok, ""); code != http.StatusUnauthorized {
			t.Errorf("the %s token: POST /mcp = %d, want 401", name, code)
		}
	}
	st, _ := info.Sim.Pane(pane)
	if code := postMCP(t, info.MCPURL, st.Env[harness.TokenEnv], ""); code == http.StatusUnauthorized {
		t.Error("the running worker's token was revoked")
	}
}

// A record names its pane's token by handle, or — written before fleetd
// kept handles — by member and pane id; everything else is dropped.
func TestDropUnownedTokens(t *testing.T) {
	t.Parallel()
	reg, err := tokens.Open(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mint := func(member, pane string) (string, tokens.ID) {
		tok, id, err := reg.Mint(member, "uid-"+member)
		if err != nil {
			t.Fatal(err)
		}
		if pane != "" {
			if err := reg.Bind(id, pane, "term-"+pane); err != nil {
				t.Fatal(err)
			}
		}
		return tok, id
	}
	byHandle, handle := mint("a", "w1:p1")
	legacy, _ := mint("b", "w1:p2")
	otherMember, _ := mint("c", "w1:p2") // b's pane id, another member
	stale, _ := mint("a", "w1:p7")       // a's earlier pane
	unbound, _ := mint("b", "")
	dropUnownedTokens(reg, []controllers.Ownership{
		{Member: "a", PaneID: "w1:p1", Token: string(handle)},
		{Member: "b", PaneID: "w1:p2"},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, c := range []struct {
		name, tok string
		want      bool
	}{
		{"recorded by handle", byHandle, true},
		{"recorded by member and pane", legacy, true},
		{"another member's on a recorded pane id", otherMember, false},
		{"an earlier pane's", stale, false},
		{"never bound", unbound, false},
	} {
		if _, ok := reg.Resolve(c.tok); ok != c.want {
			t.Errorf("%s token resolves %v, want %v", c.name, ok, c.want)
		}
	}
}
