package tokens

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/sortedindex"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// Roles an [Identity] carries.
const (
	RolePrimary = "primary"
	RoleWorker  = "worker"
)

// tokenBytes is how much randomness a token carries.
const tokenBytes = 32

// Identity is who presented a token. For the primary only Role is set.
type Identity struct {
	Role       string
	Member     string
	MemberUID  string
	PaneID     string
	TerminalID string
}

// ID names a minted token without revealing it: the hex SHA-256 of the
// token. It is safe to keep in memory, records and logs.
type ID string

// ErrUnknownToken is returned by [Registry.Bind] for an ID the registry does
// not hold (never minted, or revoked).
var ErrUnknownToken = errors.New("unknown token")

// Options tune a [Registry]. The zero value (or nil) is right for production.
type Options struct {
	// Rand is the source of token randomness; nil means crypto/rand.
	Rand io.Reader
	// FleetPrimary says the primary token is chosen elsewhere (a fleet on
	// etcd keeps its hash there): Open neither reads nor creates
	// primary.token, and the registry accepts no primary token until
	// [Registry.AcceptPrimary] names one.
	FleetPrimary bool
}

// Registry holds the hashes of the worker tokens fleetd minted and the hash
// of the primary token, and resolves a presented token to its [Identity].
// It is safe for concurrent use.
//
// The worker tokens are kept in the state database (table statedb.Tokens,
// one record per token, by its hash). Every change is staged under the
// registry's lock, so that the file has the changes in the order the
// registry made them; a mint or a bind then waits for its record to be
// durable (concurrent ones share the database's fsync), a revocation does
// not: it is in effect at once, and one a crash lost is made again at the
// next start, when fleetd revokes every token no ownership record holds
// ([Registry.Retain]).
type Registry struct {
	db   *statedb.DB
	rand io.Reader

	mu         sync.Mutex
	primary    [sha256.Size]byte
	hasPrimary bool // false until the fleet's primary is known (Options.FleetPrimary)
	// entries are the tokens handed out (and, after a restart, every
	// token the database holds), by hash; each holder is replaced, never
	// changed.
	entries byHash
	// spares are the tokens minted ahead for each member's next pane, by
	// member name (see Mint); one joins entries when Mint hands it out.
	// Nobody holds one before, so none resolves.
	//
	// Both are sorted slices, not maps: a map keeps up to twice as many
	// slots as entries (a thousand members' tokens took 2048 slots, 96 KB,
	// and their spares 53 KB), the slices 40 and 8 bytes a token.
	spares sortedindex.Index[spare]
}

// byHash is the holders of tokens by the tokens' hashes, sorted by hash:
// a lookup is a binary search (about 0.1 µs at 1000 or 10000 tokens); a
// new token or a forgotten one moves the entries after its own, 40 bytes
// each (BenchmarkByHash).
type byHash []handed

// handed is a token handed out: its hash and its holder.
type handed struct {
	sum [sha256.Size]byte
	h   *holder
}

// find returns where sum's entry is in b, or would be.
func (b byHash) find(sum [sha256.Size]byte) (int, bool) {
	return slices.BinarySearchFunc(b, sum, func(e handed, sum [sha256.Size]byte) int { return bytes.Compare(e.sum[:], sum[:]) })
}

// get returns the holder of token sum, or nil.
func (b byHash) get(sum [sha256.Size]byte) *holder {
	if i, ok := b.find(sum); ok {
		return b[i].h
	}
	return nil
}

// set makes h the holder of token sum.
func (b *byHash) set(sum [sha256.Size]byte, h *holder) {
	if i, ok := b.find(sum); ok {
		(*b)[i].h = h
	} else {
		*b = slices.Insert(*b, i, handed{sum, h})
	}
}

// remove forgets token sum.
func (b *byHash) remove(sum [sha256.Size]byte) {
	if i, ok := b.find(sum); ok {
		*b = slices.Delete(*b, i, i+1)
	}
}

// holder is whom a worker token was handed to: its [Identity] without
// the role, which is RoleWorker (64 bytes a token, where an Identity is
// 80).
type holder struct {
	member, memberUID, paneID, terminalID string
}

// identity is h as an [Identity].
func (h *holder) identity() Identity {
	return Identity{Role: RoleWorker, Member: h.member, MemberUID: h.memberUID, PaneID: h.paneID, TerminalID: h.terminalID}
}

// spare is a token minted ahead of a member's next pane: its value only
// in memory — as its random bytes, inside the spare, not a string of 43
// characters of its own — its hash on its way to the disk (commit). The
// hash is not kept: it is the hash of the value (sum), needed when the
// spare is handed out or forgotten; its first bytes (tag) tell whether a
// hash a revocation names may be the spare's without hashing every spare.
// 80 bytes, where the hash kept made 112. commit is nil once the hash is
// known durable (Bind): a commit is shared by its whole batch, and a
// fleet's spares would otherwise keep ~300 settled commits, ~60 KB at 1000
// members, for as long as they wait for their member's next pane.
type spare struct {
	raw         [tokenBytes]byte
	tag         uint64
	member, uid string
	commit      *statedb.Commit
}

// durable reports whether the spare's hash is in the file. r.mu held.
func (s *spare) durable() bool { return s.commit == nil || s.commit.Durable() }

// newSpare is a spare of randomness raw for member (name and uid), its
// hash sum.
func newSpare(raw [tokenBytes]byte, sum [sha256.Size]byte, member, uid string) *spare {
	return &spare{raw: raw, tag: tagOf(sum), member: member, uid: uid}
}

// memberOf is the member s is minted for: what spares are indexed by.
func memberOf(s *spare) string { return s.member }

// tagOf is the first bytes of a token's hash, as a spare keeps them.
func tagOf(sum [sha256.Size]byte) uint64 { return binary.BigEndian.Uint64(sum[:8]) }

// token is the spare's token.
func (s *spare) token() string { return encodeToken(s.raw) }

// sum is the hash of the spare's token.
func (s *spare) sum() [sha256.Size]byte { return sha256.Sum256([]byte(s.token())) }

// is reports whether sum is the hash of the spare's token.
func (s *spare) is(sum [sha256.Size]byte) bool { return s.tag == tagOf(sum) && s.sum() == sum }

// Open loads the worker tokens kept in db (nil keeps them in memory only)
// and the primary token of stateDir, creating the directory (mode 0700)
// and the primary token if they do not exist yet.
func Open(stateDir string, db *statedb.DB, opts *Options) (*Registry, error) {
	if opts == nil {
		opts = &Options{}
	}
	r := &Registry{
		db:     db,
		rand:   opts.Rand,
		spares: sortedindex.New(memberOf, nil),
	}
	if r.rand == nil {
		r.rand = rand.Reader
	}
	if !opts.FleetPrimary {
		primary, err := PrimaryToken(stateDir)
		if err != nil {
			return nil, err
		}
		r.primary, r.hasPrimary = sha256.Sum256([]byte(primary)), true
	}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// Mint creates a fresh worker token for member (name and uid), records its
// hash and returns the token with its [ID]. The token is not yet bound to a
// pane: call [Registry.Bind] once herdr has created it. The token value is
// returned once and never again — put it in the pane environment and forget
// it.
//
// The hash is durable before Mint returns, so that a pane whose environment
// carries the token is never started with a token a crash could forget.
// To spare the next pane of the member that wait — a repair creates its
// tab the moment it knows the pane is gone — every Mint also mints the
// member's next token ahead: its hash is written with the next commit
// anyone waits for (in a launch, the pane's ownership record, right after
// its tab.create: no write of its own runs before the tab is asked), its
// value kept in memory only (no one else can present it), and the next
// Mint for the same member and uid returns it at once if its hash is
// durable by then. A token minted ahead and never used is revoked with the
// member's tokens, or, after a restart, with every token no pane holds.
func (r *Registry) Mint(member, memberUID string) (string, ID, error) {
	r.mu.Lock()
	s := r.spares.Get(member)
	ok := s != nil
	if ok {
		r.spares.Remove(s)
	}
	use := ok && s.uid == memberUID && s.durable()
	var sum [sha256.Size]byte
	if ok {
		sum = s.sum()
	}
	switch {
	case use:
		r.entries.set(sum, &holder{member: member, memberUID: s.uid})
	case ok:
		r.db.Stage(forget(sum)) // never handed out
	}
	r.mu.Unlock()
	if use {
		r.mintAhead(member, memberUID)
		return s.token(), idOf(sum), nil
	}
	tok, id, err := r.mint(member, memberUID)
	if err != nil {
		return "", "", err
	}
	r.mintAhead(member, memberUID)
	return tok, id, nil
}

// mint creates a token for member, its hash durable when it returns.
func (r *Registry) mint(member, memberUID string) (string, ID, error) {
	s, sum, err := r.stage(member, memberUID, false)
	if err != nil {
		return "", "", err
	}
	tok, commit := s.token(), s.commit
	if err := commit.Wait(); err != nil {
		// Nobody holds the token yet, so forgetting it loses nothing.
		r.mu.Lock()
		r.entries.remove(sum)
		r.mu.Unlock()
		return "", "", fmt.Errorf("mint token for member %q: %w", member, err)
	}
	return tok, idOf(sum), nil
}

// mintAhead mints member's next token (Mint), its hash staged for the
// next commit someone waits for; a failure leaves the member without one,
// and the next Mint waits for its own. It does not ask for a write of its
// own: a repair's replacement tab would be asked of herdr while that write
// and its fsync ran (DriftRepair p99).
func (r *Registry) mintAhead(member, memberUID string) {
	_, _, _ = r.stage(member, memberUID, true)
}

// stage creates a token for member, records its hash and stages its
// record, under one lock (the file has the changes in the registry's
// order); ahead keeps it as the member's token minted ahead, else it is
// handed out. It returns the token as a spare, and its hash.
func (r *Registry) stage(member, memberUID string, ahead bool) (*spare, [sha256.Size]byte, error) {
	var raw [tokenBytes]byte
	if err := readToken(r.rand, &raw); err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	sum := sha256.Sum256([]byte(encodeToken(raw)))
	s, h := newSpare(raw, sum, member, memberUID), &holder{member: member, memberUID: memberUID}
	r.mu.Lock()
	defer r.mu.Unlock()
	s.commit = r.db.Stage(put(sum, h))
	if ahead {
		r.spares.Put(s)
	} else {
		r.entries.set(sum, h)
	}
	return s, sum, nil
}

// identity is who the spare is minted for.
func (s *spare) identity() Identity {
	return Identity{Role: RoleWorker, Member: s.member, MemberUID: s.uid}
}

// Bind records the pane and terminal a minted token was handed to.
func (r *Registry) Bind(id ID, paneID, terminalID string) error {
	sum, err := id.sum()
	if err != nil {
		return err
	}
	r.mu.Lock()
	prev := r.entries.get(sum)
	if prev == nil {
		r.mu.Unlock()
		return fmt.Errorf("bind token %s to pane %s: %w", id.short(), paneID, ErrUnknownToken)
	}
	bound := &holder{member: prev.member, memberUID: prev.memberUID, paneID: paneID, terminalID: terminalID}
	r.entries.set(sum, bound)
	commit := r.db.Stage(put(sum, bound))
	r.mu.Unlock()
	if err := commit.Wait(); err != nil {
		r.mu.Lock()
		if r.entries.get(sum) == bound { // nobody replaced it since: entries are never changed in place
			r.entries.set(sum, prev)
		}
		r.mu.Unlock()
		return fmt.Errorf("bind token %s to pane %s: %w", id.short(), paneID, err)
	}
	// The member's token minted ahead was staged before this bind (the
	// Mint of the token bound here staged it), so its commit has mostly
	// settled by now: once its hash is durable, the spare drops it.
	r.mu.Lock()
	if s := r.spares.Get(prev.member); s != nil && s.durable() {
		s.commit = nil
	}
	r.mu.Unlock()
	return nil
}

// Revoke forgets one token. Revoking an unknown token is not an error; an
// id that is not a token's hash is.
func (r *Registry) Revoke(id ID) error {
	sum, err := id.sum()
	if err != nil {
		return err
	}
	r.removeWhere(func(s [sha256.Size]byte, _ Identity) bool { return s == sum },
		func(s *spare) bool { return s.is(sum) })
	return nil
}

// RevokeMember forgets every token minted for the named member and returns
// how many there were.
func (r *Registry) RevokeMember(name string) int {
	return r.removeWhere(func(_ [sha256.Size]byte, i Identity) bool { return i.Member == name },
		func(s *spare) bool { return s.member == name })
}

// RevokeMemberPane forgets the named member's tokens bound to paneID and
// returns how many there were. A pane id alone never revokes: herdr can
// give a pane id that once was one member's to another member's pane (a
// workspace id reused after a restart), and that member's token must live.
func (r *Registry) RevokeMemberPane(member, paneID string) int {
	if member == "" || paneID == "" {
		return 0
	}
	return r.removeWhere(func(_ [sha256.Size]byte, i Identity) bool { return i.Member == member && i.PaneID == paneID },
		nil) // a token minted ahead has no pane
}

// Retain keeps the worker tokens for which keep returns true and forgets the
// rest, returning how many it forgot. fleetd calls it once at start-up,
// before any pane is launched, to drop every token no ownership record
// holds: tokens of tabs whose record was lost (closed as orphans), minted
// by a launch that never got its pane, or revoked by a fleetd that crashed
// before the revocation reached the disk. A recorded pane that ended while
// fleetd was down keeps its token until the reconciler, once herdr has been
// listed, releases it.
func (r *Registry) Retain(keep func(ID, Identity) bool) int {
	return r.removeWhere(func(s [sha256.Size]byte, i Identity) bool { return !keep(idOf(s), i) },
		func(s *spare) bool { return !keep(idOf(s.sum()), s.identity()) })
}

// Resolve returns the identity of the caller presenting token: the primary,
// a worker, or false for anything else.
//
// The presented token is hashed first; the worker lookup is a map lookup by
// that hash (its timing can only depend on the hash of the caller's own
// guess, which tells nothing about any stored token), and the primary is
// compared with [subtle.ConstantTimeCompare].
func (r *Registry) Resolve(token string) (Identity, bool) {
	if token == "" {
		return Identity{}, false
	}
	sum := sha256.Sum256([]byte(token))
	r.mu.Lock()
	defer r.mu.Unlock()
	if subtle.ConstantTimeCompare(sum[:], r.primary[:]) == 1 && r.hasPrimary {
		return Identity{Role: RolePrimary}, true
	}
	w := r.entries.get(sum)
	if w == nil {
		return Identity{}, false
	}
	return w.identity(), true
}

// AcceptPrimary makes the token whose ID is id the only primary token the
// registry accepts, from now on: the fleet's, whose hash a fleet on etcd
// keeps there. primary.token is neither read nor changed.
func (r *Registry) AcceptPrimary(id ID) error {
	sum, err := id.sum()
	if err != nil {
		return fmt.Errorf("accept primary token: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.primary, r.hasPrimary = sum, true
	return nil
}

// PrimaryID returns the [ID] of the primary token the registry accepts;
// "" when it accepts none yet.
func (r *Registry) PrimaryID() ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.hasPrimary {
		return ""
	}
	return idOf(r.primary)
}

// IDOf returns the [ID] of a token: its hex SHA-256.
func IDOf(token string) ID { return idOf(sha256.Sum256([]byte(token))) }

// SameID reports whether two IDs are equal, in time that does not depend
// on where they differ.
func SameID(a, b ID) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// removeWhere forgets every token handed out that match holds for, and
// every token minted ahead (by member) that spare holds for (nil: none):
// at once in memory, in the database with its next batch (not waited
// for).
func (r *Registry) removeWhere(match func([sha256.Size]byte, Identity) bool, spare func(*spare) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone []statedb.Change
	handedOut := 0 // not counting the tokens minted ahead (Mint)
	r.entries = slices.DeleteFunc(r.entries, func(e handed) bool {
		if !match(e.sum, e.h.identity()) {
			return false
		}
		gone = append(gone, forget(e.sum))
		handedOut++
		return true
	})
	if spare != nil {
		for _, s := range slices.Clone(r.spares.Entries()) { // Remove changes the index
			if spare(s) {
				r.spares.Remove(s)
				gone = append(gone, forget(s.sum()))
			}
		}
	}
	r.db.Stage(gone...)
	return handedOut
}

// fileEntry is one token's record: a hash and who it belongs to (as
// tokens.json held it before the state database).
type fileEntry struct {
	SHA256     string `json:"sha256"`
	Member     string `json:"member"`
	MemberUID  string `json:"memberUid,omitempty"`
	PaneID     string `json:"paneId,omitempty"`
	TerminalID string `json:"terminalId,omitempty"`
}

// forget is the change that deletes token sum's record.
func forget(sum [sha256.Size]byte) statedb.Change {
	return statedb.Delete(statedb.Tokens, string(idOf(sum)))
}

// put is the change that records token sum as handed to h.
func put(sum [sha256.Size]byte, h *holder) statedb.Change {
	id := string(idOf(sum))
	data, _ := json.Marshal(fileEntry{SHA256: id, Member: h.member, MemberUID: h.memberUID, PaneID: h.paneID, TerminalID: h.terminalID}) // strings only: cannot fail
	return statedb.Put(statedb.Tokens, id, data)
}

func (r *Registry) load() error {
	return r.db.Each(statedb.Tokens, func(key string, value []byte) error {
		var e fileEntry
		dec := json.NewDecoder(bytes.NewReader(value))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return fmt.Errorf("load token %s: %w", ID(key).short(), err)
		}
		sum, err := ID(e.SHA256).sum()
		if err != nil || e.SHA256 != key {
			return fmt.Errorf("load token %s: recorded under another hash (%s)", ID(key).short(), ID(e.SHA256).short())
		}
		// In key order, the hashes' hex: each goes at the end.
		r.entries.set(sum, &holder{member: e.Member, memberUID: e.MemberUID, paneID: e.PaneID, terminalID: e.TerminalID})
		return nil
	})
}

// PrimaryToken returns the primary's token from stateDir/primary.token,
// creating the directory (0700) and the file (0600) with a fresh token on
// first call. Concurrent first calls agree on one token. A token file that
// group or others may access is refused rather than used.
func PrimaryToken(stateDir string) (string, error) {
	state := statedir.At(stateDir)
	path := state.PrimaryToken()
	tok, err := readPrimary(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := state.Create(); err != nil {
		return "", fmt.Errorf("create primary token: %w", err)
	}
	tok, err = newToken(rand.Reader)
	if err != nil {
		return "", err
	}
	// Write a private temp file, then hard-link it into place: the link
	// fails if another process got there first, and nobody ever reads a
	// half-written token.
	f, err := os.CreateTemp(stateDir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create primary token: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.WriteString(tok + "\n")
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fmt.Errorf("create primary token: %w", werr)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readPrimary(path)
		}
		return "", fmt.Errorf("create primary token: %w", err)
	}
	if err := atomicfile.SyncDir(stateDir); err != nil {
		return "", fmt.Errorf("create primary token: %w", err)
	}
	return tok, nil
}

// ReadPrimaryToken returns the token in stateDir/primary.token without
// creating it; an error matching fs.ErrNotExist when there is none.
func ReadPrimaryToken(stateDir string) (string, error) {
	return readPrimary(statedir.At(stateDir).PrimaryToken())
}

func readPrimary(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if err := checkPrivate(path, fi); err != nil {
		return "", fmt.Errorf("primary token: %w", err)
	}
	b, err := statedir.ReadFile(path, statedir.MaxTokenBytes)
	if err != nil {
		return "", fmt.Errorf("primary token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < tokenBytes {
		return "", fmt.Errorf("primary token: %s holds %d characters; want at least %d (delete it to have fleetd create a new one)", path, len(tok), tokenBytes)
	}
	return tok, nil
}

func newToken(src io.Reader) (string, error) {
	var raw [tokenBytes]byte
	if err := readToken(src, &raw); err != nil {
		return "", err
	}
	return encodeToken(raw), nil
}

// readToken fills raw with a token's randomness from src.
func readToken(src io.Reader, raw *[tokenBytes]byte) error {
	if _, err := io.ReadFull(src, raw[:]); err != nil {
		return fmt.Errorf("mint token: %w", err)
	}
	return nil
}

// encodeToken is the token of randomness raw.
func encodeToken(raw [tokenBytes]byte) string {
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

func idOf(sum [sha256.Size]byte) ID { return ID(hex.EncodeToString(sum[:])) }

func (id ID) sum() ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	b, err := hex.DecodeString(string(id))
	if err != nil || len(b) != sha256.Size {
		return sum, fmt.Errorf("token id %q is not a SHA-256 hex digest", id)
	}
	copy(sum[:], b)
	return sum, nil
}

// short is a prefix of the id for error messages.
func (id ID) short() string {
	if len(id) > 12 {
		return string(id[:12])
	}
	return string(id)
}
