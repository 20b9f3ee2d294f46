package tokens

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedb/statedbtest"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// openDB opens the state database of state directory dir (with opts),
// closed when the test ends.
func openDB(t *testing.T, dir string, opts *statedb.Options) *statedb.DB {
	t.Helper()
	db, err := statedb.Open(statedir.At(dir).StateDB(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openFailing opens a registry in a new directory dir, on a state database
// whose writes fail while fail is set.
func openFailing(t *testing.T) (r *Registry, dir string, fail *atomic.Bool) {
	t.Helper()
	dir = t.TempDir()
	fail = new(atomic.Bool)
	r, err := Open(dir, openDB(t, dir, &statedb.Options{Wrap: statedbtest.FailingWrites(fail)}), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r, dir, fail
}

// open opens the registry of state directory dir on its state database.
func open(t *testing.T, dir string) *Registry {
	t.Helper()
	r, err := Open(dir, openDB(t, dir, nil), nil)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return r
}

// reopen is a restart: r's database is closed (what it staged written) and
// the registry of dir opened again.
func reopen(t *testing.T, r *Registry, dir string) *Registry {
	t.Helper()
	if err := r.db.Close(); err != nil {
		t.Fatal(err)
	}
	return open(t, dir)
}

func mint(t *testing.T, r *Registry, member, uid string) (string, ID) {
	t.Helper()
	tok, id, err := r.Mint(member, uid)
	if err != nil {
		t.Fatalf("Mint(%s): %v", member, err)
	}
	return tok, id
}

func TestRegistry_MintBindResolve(t *testing.T) {
	r := open(t, t.TempDir())
	tok, id := mint(t, r, "reviewer", "uid-1")
	if len(tok) != 43 {
		t.Errorf("token length = %d, want 43 (32 bytes base64url)", len(tok))
	}
	sum := sha256.Sum256([]byte(tok))
	if string(id) != hex.EncodeToString(sum[:]) {
		t.Errorf("ID = %s, want the token's SHA-256", id)
	}

	got, ok := r.Resolve(tok)
	want := Identity{Role: RoleWorker, Member: "reviewer", MemberUID: "uid-1"}
	if !ok || got != want {
		t.Fatalf("Resolve before Bind = %+v, %v; want %+v", got, ok, want)
	}
	if err := r.Bind(id, "w1:p2", "term_1"); err != nil {
		t.Fatal(err)
	}
	want.PaneID, want.TerminalID = "w1:p2", "term_1"
	if got, ok := r.Resolve(tok); !ok || got != want {
		t.Fatalf("Resolve after Bind = %+v, %v; want %+v", got, ok, want)
	}

	for _, bad := range []string{"", tok + "x", tok[:42], strings.ToUpper(tok), string(id)} {
		if got, ok := r.Resolve(bad); ok {
			t.Errorf("Resolve(%q) = %+v, want no identity", bad, got)
		}
	}
}

func TestRegistry_TokensAreFresh(t *testing.T) {
	r := open(t, t.TempDir())
	seen := map[string]bool{}
	for range 50 {
		tok, _ := mint(t, r, "m", "u")
		if seen[tok] {
			t.Fatalf("token %q minted twice", tok)
		}
		seen[tok] = true
	}
}

func TestRegistry_UsesInjectedRandomness(t *testing.T) {
	dir := t.TempDir()
	r, err := Open(dir, nil, &Options{Rand: bytes.NewReader(bytes.Repeat([]byte{0xff}, 32))})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := mint(t, r, "m", "u")
	if want := strings.Repeat("_", 42) + "8"; tok != want {
		t.Errorf("token = %q, want %q", tok, want)
	}
	if _, _, err := r.Mint("m", "u"); err == nil {
		t.Error("Mint with exhausted randomness succeeded")
	}
}

func TestRegistry_Primary(t *testing.T) {
	dir := t.TempDir()
	r := open(t, dir)
	primary, err := PrimaryToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Resolve(primary); !ok || got != (Identity{Role: RolePrimary}) {
		t.Errorf("Resolve(primary) = %+v, %v", got, ok)
	}
}

func TestRegistry_PersistsOnlyHashes(t *testing.T) {
	dir := t.TempDir()
	r := open(t, dir)
	tokA, idA := mint(t, r, "a", "uid-a")
	tokB, _ := mint(t, r, "b", "uid-b")
	if err := r.Bind(idA, "w1:p1", "term_a"); err != nil {
		t.Fatal(err)
	}

	path := statedir.At(dir).StateDB()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("state database mode = %#o, want 0600", perm)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{tokA, tokB} {
		if bytes.Contains(data, []byte(tok)) {
			t.Errorf("the state database contains a token value")
		}
	}
	if !bytes.Contains(data, []byte(idA)) {
		t.Errorf("the state database lacks the hash of a minted token:\n%s", data)
	}

	// A restarted fleetd still knows both panes' tokens.
	r2 := reopen(t, r, dir)
	if got, ok := r2.Resolve(tokA); !ok || got != (Identity{Role: RoleWorker, Member: "a", MemberUID: "uid-a", PaneID: "w1:p1", TerminalID: "term_a"}) {
		t.Errorf("after reopen Resolve(a) = %+v, %v", got, ok)
	}
	if _, ok := r2.Resolve(tokB); !ok {
		t.Error("after reopen token b does not resolve")
	}
}

func TestRegistry_Revoke(t *testing.T) {
	type minted struct{ member, pane string }
	setup := []minted{{"a", "w1:p1"}, {"a", "w1:p2"}, {"b", "w1:p3"}, {"c", ""}}
	tests := []struct {
		name      string
		revoke    func(r *Registry, ids []ID) int
		wantN     int
		wantAlive []bool
	}{
		{
			name: "by id",
			revoke: func(r *Registry, ids []ID) int {
				if err := r.Revoke(ids[2]); err != nil {
					t.Fatal(err)
				}
				return 1
			},
			wantN: 1, wantAlive: []bool{true, true, false, true},
		},
		{
			name:   "by member",
			revoke: func(r *Registry, _ []ID) int { return r.RevokeMember("a") },
			wantN:  2, wantAlive: []bool{false, false, true, true},
		},
		{
			name:   "by member and pane",
			revoke: func(r *Registry, _ []ID) int { return r.RevokeMemberPane("a", "w1:p2") },
			wantN:  1, wantAlive: []bool{true, false, true, true},
		},
		{
			name:   "another member's pane id matches nothing",
			revoke: func(r *Registry, _ []ID) int { return r.RevokeMemberPane("a", "w1:p3") },
			wantN:  0, wantAlive: []bool{true, true, true, true},
		},
		{
			name:   "empty pane id matches nothing",
			revoke: func(r *Registry, _ []ID) int { return r.RevokeMemberPane("c", "") },
			wantN:  0, wantAlive: []bool{true, true, true, true},
		},
		{
			name:   "unknown member",
			revoke: func(r *Registry, _ []ID) int { return r.RevokeMember("zed") },
			wantN:  0, wantAlive: []bool{true, true, true, true},
		},
		{
			name: "retain bound panes only",
			revoke: func(r *Registry, _ []ID) int {
				return r.Retain(func(_ ID, i Identity) bool { return i.PaneID != "" })
			},
			wantN: 1, wantAlive: []bool{true, true, true, false},
		},
		{
			name: "retain by id",
			revoke: func(r *Registry, ids []ID) int {
				return r.Retain(func(id ID, _ Identity) bool { return id == ids[1] })
			},
			wantN: 3, wantAlive: []bool{false, true, false, false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			r := open(t, dir)
			var toks []string
			var ids []ID
			for _, m := range setup {
				tok, id := mint(t, r, m.member, "uid-"+m.member)
				if m.pane != "" {
					if err := r.Bind(id, m.pane, "term-"+m.pane); err != nil {
						t.Fatal(err)
					}
				}
				toks, ids = append(toks, tok), append(ids, id)
			}
			if n := tt.revoke(r, ids); n != tt.wantN {
				t.Errorf("revoked %d, want %d", n, tt.wantN)
			}
			alive := func(reg *Registry) []bool {
				var alive []bool
				for _, tok := range toks {
					_, ok := reg.Resolve(tok)
					alive = append(alive, ok)
				}
				return alive
			}
			before := alive(r)
			reopened := reopen(t, r, dir)
			for _, got := range [][]bool{before, alive(reopened)} {
				if diff := cmp.Diff(tt.wantAlive, got); diff != "" {
					t.Errorf("resolvable tokens (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestRegistry_BindUnknown(t *testing.T) {
	r := open(t, t.TempDir())
	_, id := mint(t, r, "a", "u")
	if err := r.Revoke(id); err != nil {
		t.Fatal(err)
	}
	if err := r.Bind(id, "w1:p1", "t"); !errors.Is(err, ErrUnknownToken) {
		t.Errorf("Bind(revoked) = %v, want ErrUnknownToken", err)
	}
	if err := r.Bind("not-hex", "w1:p1", "t"); err == nil {
		t.Error("Bind(malformed id) succeeded")
	}
	if err := r.Revoke(id); err != nil {
		t.Errorf("second Revoke = %v, want idempotent", err)
	}
}

// A token record fleetd did not write stops the start: Open names it.
func TestOpen_RefusesCorruptTokenRecords(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for name, rec := range map[string]struct{ key, value string }{
		"not an object":  {sum, `"x"`},
		"bad hash":       {"abc", `{"sha256":"abc","member":"a"}`},
		"under another":  {sum, `{"sha256":"` + strings.Repeat("cd", 32) + `","member":"a"}`},
		"an unknown key": {sum, `{"sha256":"` + sum + `","member":"a","token":"x"}`},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db := openDB(t, dir, nil)
			if err := db.Write(statedb.Put(statedb.Tokens, rec.key, []byte(rec.value))); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(dir, db, nil); err == nil {
				t.Error("Open succeeded")
			}
		})
	}
}

func TestPrimaryToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	tok, err := PrimaryToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 43 {
		t.Errorf("primary token length = %d, want 43", len(tok))
	}
	fi, err := os.Stat(statedir.At(dir).PrimaryToken())
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("primary.token mode = %#o, want 0600", perm)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := di.Mode().Perm(); perm != 0o700 {
		t.Errorf("state dir mode = %#o, want 0700", perm)
	}
	again, err := PrimaryToken(dir)
	if err != nil || again != tok {
		t.Errorf("second PrimaryToken = %q, %v; want the first token", again, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("state dir holds %d entries, want only primary.token (no temp files left)", len(entries))
	}
}

func TestPrimaryToken_ConcurrentFirstCallsAgree(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = PrimaryToken(dir) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("call %d got a different token", i)
		}
	}
}

func TestPrimaryToken_RefusesUnsafeFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{name: "world readable", content: strings.Repeat("x", 43), mode: 0o644, want: "0600"},
		{name: "too short", content: "short\n", mode: 0o600, want: "at least"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := statedir.At(dir).PrimaryToken()
			if err := os.WriteFile(path, []byte(tt.content), tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			_, err := PrimaryToken(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PrimaryToken = %v, want error containing %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), tt.content) {
				t.Errorf("error leaks the file content: %v", err)
			}
		})
	}
}

// Concurrent mints and binds share the state database's commits (group commit);
// every one of them must still be durable when its call returns.
func TestRegistry_ConcurrentChangesAreAllDurable(t *testing.T) {
	dir := t.TempDir()
	r := open(t, dir)
	const n = 64
	toks := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "m" + strings.Repeat("x", i%5) + string(rune('a'+i%26))
			tok, id, err := r.Mint(name, "uid")
			if err != nil {
				t.Error(err)
				return
			}
			if err := r.Bind(id, "w1:p"+tok[:4], "term_"+tok[:4]); err != nil {
				t.Error(err)
				return
			}
			toks[i] = tok
		}()
	}
	wg.Wait()
	reopened := reopen(t, r, dir)
	for i, tok := range toks {
		got, ok := reopened.Resolve(tok)
		if !ok || got.PaneID != "w1:p"+tok[:4] {
			t.Errorf("token %d after reopen: %+v, %v; want bound to w1:p%s", i, got, ok, tok[:4])
		}
	}
}

// A failed write undoes the mint: the token is neither returned nor
// resolvable, and the registry keeps working once the disk is back.
func TestRegistry_MintRollsBackOnWriteFailure(t *testing.T) {
	r, dir, fail := openFailing(t)
	fail.Store(true)
	tok, _, err := r.Mint("reviewer", "uid")
	if err == nil || tok != "" {
		t.Fatalf("Mint with an unwritable database = %q, %v; want an error and no token", tok, err)
	}
	r.mu.Lock()
	left := len(r.entries)
	r.mu.Unlock()
	if left != 0 {
		t.Errorf("%d entries left after a failed mint, want 0", left)
	}
	fail.Store(false)
	tok, _ = mint(t, r, "reviewer", "uid")
	if _, ok := reopen(t, r, dir).Resolve(tok); !ok {
		t.Error("a token minted once the disk was back does not resolve after a restart")
	}
}

// A registry of a fleet's node (FleetPrimary) neither reads nor creates
// primary.token and accepts no primary token until told the fleet's hash;
// then it accepts that token only, and a new hash replaces it. Worker
// tokens are unaffected.
func TestRegistry_FleetPrimary(t *testing.T) {
	dir := t.TempDir()
	own, err := PrimaryToken(dir) // the node's own token, from before it joined
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, nil, &Options{FleetPrimary: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Resolve(own); ok || r.PrimaryID() != "" {
		t.Fatalf("before AcceptPrimary the node's own token resolves (%v) or a primary is set (%q)", ok, r.PrimaryID())
	}
	worker, _ := mint(t, r, "w", "uid-w")
	fleet, rotated := "the-fleets-token-0123456789abcdefghijklmn", "the-rotated-token-0123456789abcdefghijkl"
	if err := r.AcceptPrimary(IDOf(fleet)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		role  string
	}{{fleet, RolePrimary}, {own, ""}, {worker, RoleWorker}} {
		if id, _ := r.Resolve(tc.token); id.Role != tc.role {
			t.Errorf("Resolve: role %q, want %q", id.Role, tc.role)
		}
	}
	if err := r.AcceptPrimary(IDOf(rotated)); err != nil || r.PrimaryID() != IDOf(rotated) {
		t.Fatalf("AcceptPrimary(rotated): %v, primary %q", err, r.PrimaryID())
	}
	if _, ok := r.Resolve(fleet); ok {
		t.Error("the replaced fleet token still resolves")
	}
	if id, _ := r.Resolve(rotated); id.Role != RolePrimary {
		t.Error("the new fleet token does not resolve as the primary")
	}
	if err := r.AcceptPrimary("not-a-hash"); err == nil {
		t.Error("AcceptPrimary took a malformed id")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "primary.token")); err != nil || strings.TrimSpace(string(b)) != own {
		t.Errorf("primary.token changed: %q %v", b, err)
	}

	empty := t.TempDir()
	if _, err := Open(empty, nil, &Options{FleetPrimary: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(empty, "primary.token")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open with FleetPrimary created primary.token (%v)", err)
	}
}

// spareOf is member's token minted ahead, once its hash is durable.
func spareOf(t *testing.T, r *Registry, member string) *spare {
	t.Helper()
	r.mu.Lock()
	s := r.spares.Get(member)
	var commit *statedb.Commit // nil once a Bind found it durable
	if s != nil {
		commit = s.commit
	}
	r.mu.Unlock()
	if s == nil {
		t.Fatalf("no token minted ahead for %s", member)
	}
	if commit != nil {
		if err := commit.Wait(); err != nil {
			t.Fatalf("the token minted ahead for %s: %v", member, err)
		}
	}
	return s
}

// Every Mint mints the member's next token ahead, its hash written in the
// background: the next Mint of the same member (a repair) returns it
// without a write of its own — it works with the disk failing — and it
// resolves after a restart. A member declared again (another uid) or
// revoked never gets the one minted ahead for the old one, and a token
// minted ahead is no token handed out: it resolves only once handed out,
// and it is not counted as revoked.
func TestRegistry_MintHandsOutTheTokenMintedAhead(t *testing.T) {
	r, dir, fail := openFailing(t)
	mint(t, r, "reviewer", "uid")
	ahead := spareOf(t, r, "reviewer")
	if _, ok := r.Resolve(ahead.token()); ok {
		t.Error("the token minted ahead resolves before Mint handed it out")
	}
	fail.Store(true)
	tok, id, err := r.Mint("reviewer", "uid")
	if err != nil || tok != ahead.token() || id != idOf(ahead.sum()) {
		t.Fatalf("the second Mint with the disk failing = %v; want the token minted ahead, at once", err)
	}
	if ident, ok := r.Resolve(tok); !ok || ident.Member != "reviewer" || ident.MemberUID != "uid" {
		t.Errorf("the token minted ahead, handed out: %+v, %v; want reviewer's", ident, ok)
	}
	fail.Store(false)
	if ident, ok := reopen(t, r, dir).Resolve(tok); !ok || ident.Member != "reviewer" || ident.MemberUID != "uid" {
		t.Errorf("the token minted ahead after a restart: %+v, %v; want reviewer's", ident, ok)
	}

	r = open(t, t.TempDir())
	mint(t, r, "reviewer", "uid")
	old := spareOf(t, r, "reviewer")
	tok, _ = mint(t, r, "reviewer", "uid-2")
	if ident, _ := r.Resolve(tok); tok == old.token() || ident.MemberUID != "uid-2" {
		t.Errorf("a Mint for reviewer declared again got %+v (the old one's token minted ahead: %v)", ident, tok == old.token())
	}
	if _, ok := r.Resolve(old.token()); ok {
		t.Error("the token minted ahead for the old reviewer still resolves")
	}
	ahead = spareOf(t, r, "reviewer")
	if n := r.RevokeMember("reviewer"); n != 2 {
		t.Errorf("RevokeMember = %d, want the 2 tokens handed out", n)
	}
	if _, ok := r.Resolve(ahead.token()); ok {
		t.Error("a revoked member's token minted ahead still resolves")
	}
	if tok, _ := mint(t, r, "reviewer", "uid-2"); tok == ahead.token() {
		t.Error("Mint after RevokeMember handed out the revoked token minted ahead")
	}
}

// A Bind of the token handed out forgets the commit of the one minted
// ahead once its hash is durable, and the next Mint still hands that one
// out at once, with the disk failing.
func TestRegistry_MintHandsOutTheTokenMintedAheadAfterABind(t *testing.T) {
	r, _, fail := openFailing(t)
	_, id := mint(t, r, "reviewer", "uid")
	if err := r.Bind(id, "w1:p2", "term-2"); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	ahead := r.spares.Get("reviewer")
	r.mu.Unlock()
	if ahead == nil || ahead.commit != nil {
		t.Fatalf("after the Bind, the token minted ahead is %+v; want it, its commit forgotten", ahead)
	}
	fail.Store(true)
	tok, _, err := r.Mint("reviewer", "uid")
	if err != nil || tok != ahead.token() {
		t.Fatalf("the second Mint with the disk failing = %v; want the token minted ahead, at once", err)
	}
}

// A token minted ahead is forgotten by a revocation that names it: by its
// hash (Revoke, though nobody was given it), by its member (RevokeMember)
// or by Retain's keep; never by a pane (it has none) nor by another
// token's hash. Forgotten, it is never handed out, and its record goes too.
func TestRegistry_RevocationsOfTheTokenMintedAhead(t *testing.T) {
	tests := []struct {
		name   string
		revoke func(r *Registry, ahead ID)
		gone   bool
	}{
		{"by its hash", func(r *Registry, ahead ID) { r.Revoke(ahead) }, true},
		{"by another hash", func(r *Registry, _ ID) { r.Revoke(IDOf("not a token of this registry")) }, false},
		{"by its member", func(r *Registry, _ ID) { r.RevokeMember("a") }, true},
		{"by another member", func(r *Registry, _ ID) { r.RevokeMember("b") }, false},
		{"by its member's pane", func(r *Registry, _ ID) { r.RevokeMemberPane("a", "w1:p2") }, false},
		{"not kept by Retain", func(r *Registry, ahead ID) {
			r.Retain(func(id ID, i Identity) bool { return id != ahead || i.Member != "a" || i.MemberUID != "uid-a" })
		}, true},
		{"kept by Retain", func(r *Registry, _ ID) { r.Retain(func(ID, Identity) bool { return true }) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			r := open(t, dir)
			_, id := mint(t, r, "a", "uid-a")
			if err := r.Bind(id, "w1:p2", "term-2"); err != nil {
				t.Fatal(err)
			}
			ahead := spareOf(t, r, "a")
			aheadID := idOf(ahead.sum())
			tt.revoke(r, aheadID)
			r.mu.Lock()
			kept := r.spares.Get("a") != nil
			r.mu.Unlock()
			if kept == tt.gone {
				t.Fatalf("the token minted ahead kept = %v, want %v", kept, !tt.gone)
			}
			if err := r.db.Sync(); err != nil {
				t.Fatal(err)
			}
			_, onDisk := reopen(t, r, dir).Resolve(ahead.token())
			if onDisk == tt.gone {
				t.Errorf("its record kept = %v, want %v", onDisk, !tt.gone)
			}
		})
	}
}
