package dirstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// metaRecord is what the store remembers about an object across restarts:
// the metadata it owns, and the object's last good definition with the
// file it came from, so that after a restart a file that no longer decodes
// keeps that definition, and a mass removal made while fleetd was stopped
// is held (store.Hold's baseline). Records written before the definitions
// were kept have no Source or Object.
//
// In memory a definition is obj, the object in effect (the snapshot's own,
// never changed), once [metaBook.keep] has seen it; Object is then nil and
// is encoded from obj only to save the records. Object is the definition
// as the file had it until then.
//
// The book keeps each record by pointer, changed in place: a map holds up
// to twice as many slots as entries (a thousand records take 2048), and a
// pointer's slot is a fifth the size of a record's.
type metaRecord struct {
	UID        string          `json:"uid"`
	Generation int64           `json:"generation"`
	SpecHash   specDigest      `json:"specHash"`
	Created    time.Time       `json:"creationTimestamp"`
	Source     string          `json:"source,omitempty"`
	Object     json.RawMessage `json:"object,omitempty"`
	obj        v1alpha1.Object
}

// metaBook assigns uid, generation and creationTimestamp, keyed by
// "Kind/name", and persists them when path is set (the state directory's
// objects file).
type metaBook struct {
	state statedir.Layout
	path  string
	recs  map[string]*metaRecord
	dirty bool
	size  int // of the objects file encode made last
}

func loadMeta(stateDir string) (*metaBook, error) {
	b := &metaBook{recs: map[string]*metaRecord{}}
	if stateDir == "" {
		return b, nil
	}
	b.state = statedir.At(stateDir)
	b.path = b.state.Objects()
	data, err := statedir.ReadFile(b.path, statedir.MaxIndexBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read object metadata: %w", err)
	}
	if err := json.Unmarshal(data, &b.recs); err != nil {
		return nil, fmt.Errorf("read object metadata %s: %w", b.path, err)
	}
	if b.recs == nil {
		b.recs = map[string]*metaRecord{}
	}
	for k, rec := range b.recs {
		if rec == nil { // "key": null, read as the zero record it always was
			b.recs[k] = &metaRecord{}
		}
	}
	return b, nil
}

// stamp sets obj's uid, generation and creationTimestamp: a new name gets a
// new uid and generation 1; a changed spec bumps the generation. The
// object's creationTimestamp points at the record's, which never changes
// (an object in effect is never changed either): every object stamped
// under a name shares one.
func (b *metaBook) stamp(obj v1alpha1.Object, now time.Time) {
	key := store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}.String()
	h := specHash(obj)
	rec, ok := b.recs[key]
	switch {
	case !ok:
		rec = &metaRecord{UID: store.NewUID(), Generation: 1, SpecHash: h, Created: now.UTC().Truncate(time.Second)}
		b.recs[key], b.dirty = rec, true
	case rec.SpecHash != h:
		rec.Generation++
		rec.SpecHash = h
		b.dirty = true
	}
	m := obj.GetMeta()
	m.UID, m.Generation = rec.UID, rec.Generation
	m.ResourceVersion = "" // files have no versions: a written one means nothing here
	m.CreationTimestamp = &rec.Created
}

// keep records obj, in effect, as its last good definition, defined in
// source. The record keeps obj itself, which the snapshot holds anyway
// (and never changes), not a copy.
func (b *metaBook) keep(obj v1alpha1.Object, source string) {
	key := store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}.String()
	rec, ok := b.recs[key]
	if !ok || (rec.obj == obj && rec.Source == source) {
		return // stamped first, always; or kept already
	}
	changed := rec.Source != source
	if !changed {
		data, err := json.Marshal(obj)
		changed = err != nil || !bytes.Equal(recordedJSON(rec), data)
	}
	rec.Source, rec.Object, rec.obj = source, nil, obj
	b.dirty = b.dirty || changed
}

// keysBySource indexes the records' keys by the file that defined them,
// each file's keys in name order: a scan meeting a thousand files it has
// not read before (every file, at a restart) looks each one's records up
// here instead of sorting and walking every record per file.
func (b *metaBook) keysBySource() map[string][]string {
	out := map[string][]string{}
	for _, key := range slices.Sorted(maps.Keys(b.recs)) {
		if src := b.recs[key].Source; src != "" {
			out[src] = append(out[src], key)
		}
	}
	return out
}

// lastGood returns the last good objects of the file at path, as recorded
// under keys (its keys in keysBySource), in name order; none when the
// records have none.
func (b *metaBook) lastGood(path string, keys []string) decode.FileResult {
	f := decode.FileResult{Path: path}
	for _, key := range keys {
		if obj := b.recs[key].object(key); obj != nil {
			f.Objects = append(f.Objects, obj)
		}
	}
	return f
}

// recordedJSON is the record's definition as json.Marshal writes it: the
// object's own encoding, or the one read from the objects file, which
// holds it indented (compacted here, so that a definition read back
// compares equal to the same object encoded again).
func recordedJSON(rec *metaRecord) []byte {
	if rec.obj != nil {
		data, _ := json.Marshal(rec.obj)
		return data
	}
	var buf bytes.Buffer
	if json.Compact(&buf, rec.Object) != nil {
		return rec.Object
	}
	return buf.Bytes()
}

// baseline is what was in effect when the records were last saved: every
// recorded object with its definition, where it was defined.
func (b *metaBook) baseline() *store.Snapshot {
	s := store.NewSnapshot()
	s.Synced = true
	for key, rec := range b.recs {
		if obj := rec.object(key); obj != nil {
			s.Put(obj, rec.Source)
		}
	}
	return s
}

// object decodes the recorded definition of the object key names
// ("Kind/name"); nil when there is none (or it does not decode).
func (r *metaRecord) object(key string) v1alpha1.Object {
	kind, _, _ := strings.Cut(key, "/")
	if r.obj != nil && r.Source != "" {
		return r.obj
	}
	if len(r.Object) == 0 || r.Source == "" {
		return nil
	}
	obj, err := store.UnmarshalObject(kind, r.Object)
	if err != nil {
		return nil
	}
	return obj
}

// prune forgets every object not in present.
func (b *metaBook) prune(present map[string]bool) {
	for k := range b.recs {
		if !present[k] {
			delete(b.recs, k)
			b.dirty = true
		}
	}
}

func (b *metaBook) save() error {
	if !b.dirty || b.path == "" {
		return nil
	}
	data, err := b.encode()
	if err != nil {
		return err
	}
	if err := b.state.Create(); err != nil {
		return fmt.Errorf("save object metadata: %w", err)
	}
	if err := atomicfile.Write(b.path, append(data, '\n'), statedir.FileMode); err != nil {
		return fmt.Errorf("save object metadata: %w", err)
	}
	b.dirty = false
	return nil
}

// encode returns the records as the objects file holds them: what
// json.MarshalIndent(records, "", "  ") makes of them, each definition
// encoded from the object in effect. It encodes them one at a time into
// a buffer of its own: encoding/json keeps the buffer of each Marshal for
// the next one, and a whole fleet's records encoded at once (a megabyte
// for a thousand members) would keep one that size alive for as long as
// the process encodes anything. Its encoders write each record and key
// into that buffer, which starts at the size of the last file, with room
// for the newline save ends it with.
func (b *metaBook) encode() ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(b.size + 1)
	enc := json.NewEncoder(&buf) // escapes as Marshal does
	enc.SetIndent("  ", "  ")
	keys := json.NewEncoder(&buf)
	// encodes v into buf as Marshal would have, or (indent) MarshalIndent
	// with prefix and indent of two spaces: without Encode's newline.
	put := func(e *json.Encoder, v any) error {
		if err := e.Encode(v); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1)
		return nil
	}
	buf.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(b.recs)) {
		// The definition in effect is encoded in the record's own pass
		// (out.Object hides rec.Object, and is the last field as it is),
		// not marshalled apart and then compacted again as raw JSON.
		rec := b.recs[k]
		out := struct {
			metaRecord
			Object any `json:"object,omitempty"`
		}{metaRecord: *rec}
		switch {
		case rec.obj != nil:
			out.Object = rec.obj
		case len(rec.Object) > 0:
			out.Object = rec.Object
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString("\n  ")
		if err := put(keys, k); err != nil {
			return nil, fmt.Errorf("encode object metadata: %s: %w", k, err)
		}
		buf.WriteString(": ")
		if err := put(enc, out); err != nil {
			return nil, fmt.Errorf("encode object metadata: %s: %w", k, err)
		}
	}
	if len(b.recs) > 0 {
		buf.WriteByte('\n')
	}
	buf.WriteByte('}')
	b.size = buf.Len()
	return buf.Bytes(), nil
}

// specDigest is the SHA-256 of an object's spec ([specHash]): its 32
// bytes, written in the objects file as the hex string the file always
// held. One that is not 64 hex digits (the file edited by hand) reads as
// the zero digest, which no spec has: the spec counts as changed, as a
// string no spec hashes to always made it count.
type specDigest [sha256.Size]byte

// MarshalText writes the digest in hex.
func (d specDigest) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, d[:]), nil }

// UnmarshalText reads a digest MarshalText wrote; anything else is the
// zero digest.
func (d *specDigest) UnmarshalText(text []byte) error {
	*d = specDigest{}
	if hex.DecodedLen(len(text)) == len(d) {
		if _, err := hex.Decode(d[:], text); err != nil {
			*d = specDigest{}
		}
	}
	return nil
}

// specHash fingerprints an object's spec; only a spec change bumps the
// generation, as in Kubernetes.
func specHash(obj v1alpha1.Object) specDigest {
	var spec any
	switch o := obj.(type) {
	case *v1alpha1.Member:
		spec = o.Spec
	case *v1alpha1.Profile:
		spec = o.Spec
	case *v1alpha1.Tenant:
		spec = o.Spec
	default:
		spec = obj
	}
	data, _ := json.Marshal(spec) // plain data types: cannot fail
	return sha256.Sum256(data)
}

// sameObject reports whether a and b have equal content, status aside.
func sameObject(a, b v1alpha1.Object) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
