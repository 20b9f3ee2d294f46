package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/fleetd-dev/fleetd/internal/atomicfile"
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
type Registry struct {
	path string
	rand io.Reader

	mu         sync.Mutex
	primary    [sha256.Size]byte
	hasPrimary bool // false until the fleet's primary is known (Options.FleetPrimary)
	entries    map[[sha256.Size]byte]Identity
	version    uint64 // bumped by every change to entries
	saved      uint64 // the version tokens.json holds

	// saveMu serialises writes of tokens.json. Changes made while a write
	// is under way are written together by the next writer (group commit),
	// so concurrent mints cost one fsync'd rewrite, not one each.
	saveMu sync.Mutex
}

// Open loads the registry kept in stateDir (creating the directory, mode
// 0700, and the primary token if they do not exist yet).
func Open(stateDir string, opts *Options) (*Registry, error) {
	if opts == nil {
		opts = &Options{}
	}
	r := &Registry{
		path:    statedir.At(stateDir).Tokens(),
		rand:    opts.Rand,
		entries: make(map[[sha256.Size]byte]Identity),
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
func (r *Registry) Mint(member, memberUID string) (string, ID, error) {
	tok, err := newToken(r.rand)
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256([]byte(tok))
	r.mu.Lock()
	r.entries[sum] = Identity{Role: RoleWorker, Member: member, MemberUID: memberUID}
	want := r.changedLocked()
	r.mu.Unlock()
	if err := r.persist(want); err != nil {
		// Nobody holds the token yet, so forgetting it loses nothing.
		r.mu.Lock()
		delete(r.entries, sum)
		r.changedLocked()
		r.mu.Unlock()
		return "", "", fmt.Errorf("mint token for member %q: %w", member, err)
	}
	return tok, idOf(sum), nil
}

// Bind records the pane and terminal a minted token was handed to.
func (r *Registry) Bind(id ID, paneID, terminalID string) error {
	sum, err := id.sum()
	if err != nil {
		return err
	}
	r.mu.Lock()
	ident, ok := r.entries[sum]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("bind token %s to pane %s: %w", id.short(), paneID, ErrUnknownToken)
	}
	prev := ident
	ident.PaneID, ident.TerminalID = paneID, terminalID
	r.entries[sum] = ident
	want := r.changedLocked()
	r.mu.Unlock()
	if err := r.persist(want); err != nil {
		r.mu.Lock()
		if cur, ok := r.entries[sum]; ok && cur == ident {
			r.entries[sum] = prev
			r.changedLocked()
		}
		r.mu.Unlock()
		return fmt.Errorf("bind token %s to pane %s: %w", id.short(), paneID, err)
	}
	return nil
}

// Revoke forgets one token. Revoking an unknown token is not an error.
func (r *Registry) Revoke(id ID) error {
	sum, err := id.sum()
	if err != nil {
		return err
	}
	_, err = r.removeWhere(func(s [sha256.Size]byte, _ Identity) bool { return s == sum })
	return err
}

// RevokeMember forgets every token minted for the named member and returns
// how many there were.
func (r *Registry) RevokeMember(name string) (int, error) {
	return r.removeWhere(func(_ [sha256.Size]byte, i Identity) bool { return i.Member == name })
}

// RevokeMemberPane forgets the named member's tokens bound to paneID and
// returns how many there were. A pane id alone never revokes: herdr can
// give a pane id that once was one member's to another member's pane (a
// workspace id reused after a restart), and that member's token must live.
func (r *Registry) RevokeMemberPane(member, paneID string) (int, error) {
	if member == "" || paneID == "" {
		return 0, nil
	}
	return r.removeWhere(func(_ [sha256.Size]byte, i Identity) bool { return i.Member == member && i.PaneID == paneID })
}

// Retain keeps the worker tokens for which keep returns true and forgets the
// rest, returning how many it forgot. fleetd calls it once at start-up,
// before any pane is launched, to drop every token no ownership record
// holds: tokens of tabs whose record was lost (closed as orphans) or minted
// by a launch that never got its pane. A recorded pane that ended while
// fleetd was down keeps its token until the reconciler, once herdr has been
// listed, releases it.
func (r *Registry) Retain(keep func(ID, Identity) bool) (int, error) {
	return r.removeWhere(func(s [sha256.Size]byte, i Identity) bool { return !keep(idOf(s), i) })
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
	ident, ok := r.entries[sum]
	return ident, ok
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

func (r *Registry) removeWhere(match func([sha256.Size]byte, Identity) bool) (int, error) {
	r.mu.Lock()
	n := 0
	for sum, ident := range r.entries {
		if match(sum, ident) {
			delete(r.entries, sum)
			n++
		}
	}
	if n == 0 {
		r.mu.Unlock()
		return 0, nil
	}
	want := r.changedLocked()
	r.mu.Unlock()
	// The tokens stop resolving now even if the file cannot be rewritten:
	// revocation fails closed.
	if err := r.persist(want); err != nil {
		return n, fmt.Errorf("revoke %d token(s): %w", n, err)
	}
	return n, nil
}

// changedLocked records a change to entries and returns the version that
// must reach the file for the change to be durable.
func (r *Registry) changedLocked() uint64 {
	r.version++
	return r.version
}

// persist makes sure tokens.json holds at least version want. A writer that
// finds its change already written by another returns at once.
func (r *Registry) persist(want uint64) error {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.mu.Lock()
	if r.saved >= want {
		r.mu.Unlock()
		return nil
	}
	v := r.version
	data, err := r.encodeLocked()
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(r.path, data, statedir.FileMode); err != nil {
		return err
	}
	r.mu.Lock()
	r.saved = v
	r.mu.Unlock()
	return nil
}

// fileEntry is one token in tokens.json: a hash and who it belongs to.
type fileEntry struct {
	SHA256     string `json:"sha256"`
	Member     string `json:"member"`
	MemberUID  string `json:"memberUid,omitempty"`
	PaneID     string `json:"paneId,omitempty"`
	TerminalID string `json:"terminalId,omitempty"`
}

type registryFile struct {
	Version int         `json:"version"`
	Tokens  []fileEntry `json:"tokens"`
}

const registryVersion = 1

func (r *Registry) load() error {
	f, err := statedir.Open(r.path, os.O_RDONLY, statedir.MaxIndexBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load token registry: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("load token registry: %w", err)
	}
	if err := checkPrivate(r.path, fi); err != nil {
		return fmt.Errorf("load token registry: %w", err)
	}
	var rf registryFile
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rf); err != nil {
		return fmt.Errorf("load token registry %s: %w", r.path, err)
	}
	if rf.Version != registryVersion {
		return fmt.Errorf("load token registry %s: version %d; want %d", r.path, rf.Version, registryVersion)
	}
	for i, e := range rf.Tokens {
		sum, err := ID(e.SHA256).sum()
		if err != nil {
			return fmt.Errorf("load token registry %s: tokens[%d]: %w", r.path, i, err)
		}
		r.entries[sum] = Identity{Role: RoleWorker, Member: e.Member, MemberUID: e.MemberUID, PaneID: e.PaneID, TerminalID: e.TerminalID}
	}
	return nil
}

func (r *Registry) encodeLocked() ([]byte, error) {
	rf := registryFile{Version: registryVersion, Tokens: make([]fileEntry, 0, len(r.entries))}
	for sum, i := range r.entries {
		rf.Tokens = append(rf.Tokens, fileEntry{
			SHA256: string(idOf(sum)), Member: i.Member, MemberUID: i.MemberUID, PaneID: i.PaneID, TerminalID: i.TerminalID,
		})
	}
	sort.Slice(rf.Tokens, func(a, b int) bool {
		x, y := rf.Tokens[a], rf.Tokens[b]
		if x.Member != y.Member {
			return x.Member < y.Member
		}
		return x.SHA256 < y.SHA256
	})
	data, err := json.MarshalIndent(rf, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
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
	b := make([]byte, tokenBytes)
	if _, err := io.ReadFull(src, b); err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
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
