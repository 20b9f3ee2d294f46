package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// The first claim of the fleet's primary token wins; a later one gets the
// winner's hash; every node reads it, follows a change and keeps the last
// good hash when the key goes or turns bad.
func TestToken_ClaimedOnceAndFollowed(t *testing.T) {
	f := newFixture(t)
	a, b := NewToken(f.cli, f.opts()), NewToken(f.cli, f.opts())
	f.run(a.Run)
	f.run(b.Run)
	ctx := context.Background()
	first := FleetToken{SHA256: strings.Repeat("ab", 32), Node: "a"}
	second := FleetToken{SHA256: strings.Repeat("cd", 32), Node: "b"}
	if got, err := a.Claim(ctx, first); err != nil || got != first {
		t.Fatalf("first claim: %+v %v, want it won", got, err)
	}
	if got, err := b.Claim(ctx, second); err != nil || got != first {
		t.Fatalf("second claim: %+v %v, want the first's", got, err)
	}
	tokenUntil := func(tok *Token, want FleetToken) {
		t.Helper()
		until(t, "the token hash read", tok.Changed, func() bool { got, ok := tok.Primary(); return ok && got == want })
	}
	tokenUntil(a, first)
	tokenUntil(b, first)

	f.put("/tokens/primary", `{"sha256":"`+strings.Repeat("EF", 32)+`","node":"b"}`)
	changed := FleetToken{SHA256: strings.Repeat("ef", 32), Node: "b"}
	tokenUntil(b, changed)
	for _, bad := range []string{`{"sha256":"short","node":"b"}`, `{"sha256":"` + strings.Repeat("ab", 32) + `","node":"b","token":"x"}`} {
		f.put("/tokens/primary", bad)
	}
	resp, err := f.cli.Delete(ctx, f.prefix+"/tokens/primary")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if err := b.inf.WaitRevision(wctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Primary(); got != changed {
		t.Errorf("after bad values and a delete: %+v, want %+v", got, changed)
	}
	// With the key gone, a claim wins again.
	if got, err := a.Claim(ctx, second); err != nil || got != second {
		t.Fatalf("claim after the delete: %+v %v", got, err)
	}
	tokenUntil(b, second)
}

// A node says once which primary token it accepts when it is not the one
// in its own primary.token — the node that minted it, how to print it
// there and how to put it here — and never logs a token.
func TestExplainFleetToken(t *testing.T) {
	const own, fleet = "this-nodes-own-token-0123456789abcdefghij", "the-fleets-token-0123456789abcdefghijklmn"
	hash := FleetToken{SHA256: string(tokens.IDOf(fleet)), Node: "laptop"}
	state := statedir.At(t.TempDir())
	for _, tc := range []struct {
		name    string
		fleet   FleetToken
		own     string
		missing bool
		node    string
		want    []string
	}{
		{"own token differs", hash, own, false, "buildbox", []string{"level=WARN", "minted by node laptop", "fleetd token", "is a different token and is not accepted", "FLEETD_TOKEN", state.PrimaryToken()}},
		{"no primary.token", hash, "", true, "buildbox", []string{"level=WARN", "minted by node laptop", "this node has no primary.token", "FLEETD_TOKEN"}},
		{"its own", FleetToken{SHA256: string(tokens.IDOf(own)), Node: "buildbox"}, own, false, "buildbox", []string{"level=INFO", "the one in its primary.token"}},
		{"minted here, replaced since", FleetToken{SHA256: string(tokens.IDOf(fleet)), Node: "buildbox"}, own, false, "buildbox", []string{"level=WARN", "this node minted", "delete the hash in etcd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			explainFleetToken(tc.fleet, tc.own, tc.missing, state, tc.node, slog.New(slog.NewTextHandler(&buf, nil)))
			out := buf.String()
			if n := strings.Count(out, "\n"); n != 1 {
				t.Errorf("%d lines logged, want 1:\n%s", n, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("log %q does not say %q", out, w)
				}
			}
			if strings.Contains(out, own) || strings.Contains(out, fleet) {
				t.Errorf("log holds a token: %s", out)
			}
		})
	}
}

// Two nodes that start together in a fleet with no primary token both
// find none, mint one and claim it; the one whose claim loses removes the
// token it minted, so that its state directory holds no primary.token a
// CLI there would be refused with (it takes FLEETD_TOKEN, or `fleetd
// token` on the node that minted the fleet's). Both accept the fleet's.
func TestAdopt_NodesStartedTogetherKeepOnlyTheFleetsToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	type node struct {
		state statedir.Layout
		toks  *tokens.Registry
		tok   *Token
		err   error
	}
	nodes := make([]*node, 2)
	for i := range nodes {
		state := statedir.At(t.TempDir())
		toks, err := tokens.Open(state.Root(), nil, &tokens.Options{FleetPrimary: true})
		if err != nil {
			t.Fatal(err)
		}
		tok := NewToken(f.cli, f.opts())
		if err := tok.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		nodes[i] = &node{state: state, toks: toks, tok: tok}
	}
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { n.err = n.tok.Adopt(ctx, n.toks, n.state, fmt.Sprintf("node%d", i)) })
	}
	wg.Wait()
	resp, err := f.cli.Get(ctx, f.prefix+"/tokens/primary")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the fleet's token hash: %v %v", resp, err)
	}
	fleet, err := decodeFleetToken(resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	holders := 0
	for i, n := range nodes {
		if n.err != nil {
			t.Fatalf("node%d: Adopt: %v", i, n.err)
		}
		if !tokens.SameID(n.toks.PrimaryID(), tokens.ID(fleet.SHA256)) {
			t.Errorf("node%d accepts another primary token than the fleet's", i)
		}
		own, err := tokens.ReadPrimaryToken(n.state.Root())
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			t.Fatal(err)
		case !tokens.SameID(tokens.IDOf(own), tokens.ID(fleet.SHA256)):
			t.Errorf("node%d keeps a primary.token that is not the fleet's", i)
		default:
			holders++
			if fleet.Node != fmt.Sprintf("node%d", i) {
				t.Errorf("node%d holds the fleet's token, which etcd says node %s minted", i, fleet.Node)
			}
		}
	}
	if holders != 1 {
		t.Errorf("%d state directories hold the fleet's token; want the minting node's alone", holders)
	}
}
