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
	"reflect"
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
// The book keeps a record in memory only until an object takes its name:
// from then on the record is what the object in effect carries — uid,
// generation and creationTimestamp in its metadata, its spec's digest, and
// the file the snapshot names — and is made from the snapshot when the
// records are saved ([metaBook.lookup]); obj is that object, and Object is
// encoded from it. A record read from the objects file holds the definition
// as the file had it, in Object.
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
//
// Its records are those of live, the objects in effect when the book was
// last given them ([metaBook.retain]), made from the objects themselves,
// and recs: the records read from the objects file that no object has
// taken yet (a recs record wins over live's). A thousand members' records
// are not kept a second time beside the snapshot that holds their objects.
type metaBook struct {
	state statedir.Layout
	path  string
	recs  map[string]*metaRecord
	live  *store.Snapshot // nil until the first retain
	dirty bool
	size  int // of the objects file encode made last
	// created is the creationTimestamp stamp gave a new object last, for
	// the objects it creates in the same second: they share it.
	created *time.Time
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

// stamp sets obj's uid, generation and creationTimestamp from its name's
// record: a new name gets a new uid, generation 1 and the current second;
// a changed spec bumps the generation. The object's creationTimestamp
// points at the one of the object in effect under its name, which never
// changes (an object in effect is never changed either): every object
// stamped under a name shares one, and the names created in one second
// share theirs.
func (b *metaBook) stamp(obj v1alpha1.Object, now time.Time) {
	key := store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}
	m := obj.GetMeta()
	m.ResourceVersion = "" // files have no versions: a written one means nothing here
	if rec, ok := b.recs[key.String()]; ok {
		created := rec.Created
		m.UID, m.Generation, m.CreationTimestamp = rec.UID, rec.Generation, &created
		if rec.SpecHash != specHash(obj) {
			m.Generation++
			b.dirty = true
		}
		return
	}
	if last := b.inEffect(key); last != nil {
		lm := last.GetMeta()
		m.UID, m.Generation, m.CreationTimestamp = lm.UID, lm.Generation, lm.CreationTimestamp
		if !sameSpec(last, obj) {
			m.Generation++
			b.dirty = true
		}
		return
	}
	if created := now.UTC().Truncate(time.Second); b.created == nil || !b.created.Equal(created) {
		b.created = &created
	}
	m.UID, m.Generation, m.CreationTimestamp = store.NewUID(), 1, b.created
	b.dirty = true
}

// inEffect returns live's object under key; nil when there is none.
func (b *metaBook) inEffect(key store.Key) v1alpha1.Object {
	if b.live == nil {
		return nil
	}
	if obj, ok := b.live.Object(key); ok {
		return obj
	}
	return nil
}

// keep records obj, stamped and in effect, as its last good definition,
// defined in source: obj, which the snapshot holds anyway (and never
// changes), is its record from now on — the one read from the objects
// file, if any, is dropped — and the records are to be saved again unless
// they said so already.
func (b *metaBook) keep(obj v1alpha1.Object, source string) {
	key := store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}
	var was []byte // the definition recorded
	if rec, ok := b.recs[key.String()]; ok {
		delete(b.recs, key.String())
		if rec.Source != source {
			b.dirty = true
			return
		}
		was = recordedJSON(rec)
	} else if last := b.inEffect(key); last == nil || b.live.Sources[key] != source {
		b.dirty = true // new (stamp said so), or moved to another file
		return
	} else if last == obj {
		return
	} else {
		was, _ = json.Marshal(last)
	}
	data, err := json.Marshal(obj)
	b.dirty = b.dirty || err != nil || !bytes.Equal(was, data)
}

// keys returns the keys of every record, in order.
func (b *metaBook) keys() []string {
	keys := slices.Collect(maps.Keys(b.recs))
	if b.live != nil {
		for k := range b.live.Sources {
			if _, ok := b.recs[k.String()]; !ok {
				keys = append(keys, k.String())
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// lookup returns key's record: the one read from the objects file, or the
// one live's object carries, made anew (its spec digest computed) at each
// call; false when the book has none.
func (b *metaBook) lookup(key store.Key) (*metaRecord, bool) {
	if rec, ok := b.recs[key.String()]; ok {
		return rec, true
	}
	obj := b.inEffect(key)
	if obj == nil {
		return nil, false
	}
	m := obj.GetMeta()
	rec := &metaRecord{UID: m.UID, Generation: m.Generation, SpecHash: specHash(obj), Source: b.live.Sources[key], obj: obj}
	if m.CreationTimestamp != nil {
		rec.Created = *m.CreationTimestamp
	}
	return rec, true
}

// parseKey is the key a record is filed under ("Kind/name").
func parseKey(key string) store.Key {
	kind, name, _ := strings.Cut(key, "/")
	return store.Key{Kind: kind, Name: name}
}

// keysBySource indexes the records' keys by the file that defined them,
// each file's keys in name order: a scan meeting a thousand files it has
// not read before (every file, at a restart) looks each one's records up
// here instead of sorting and walking every record per file.
func (b *metaBook) keysBySource() map[string][]string {
	out := map[string][]string{}
	for _, key := range b.keys() {
		var src string
		if rec, ok := b.recs[key]; ok {
			src = rec.Source
		} else {
			src = b.live.Sources[parseKey(key)]
		}
		if src != "" {
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
		var obj v1alpha1.Object
		if rec, ok := b.recs[key]; ok {
			obj = rec.object(key)
		} else {
			obj = b.inEffect(parseKey(key))
		}
		if obj != nil {
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
	kind := parseKey(key).Kind
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

// retain makes snap's objects the ones in effect, whose records they
// carry, and forgets every record of an object snap does not hold.
func (b *metaBook) retain(snap *store.Snapshot) {
	for k := range b.recs {
		if _, ok := snap.Sources[parseKey(k)]; !ok {
			delete(b.recs, k)
			b.dirty = true
		}
	}
	if b.live != nil {
		for k := range b.live.Sources {
			if _, ok := snap.Sources[k]; !ok {
				b.dirty = true
				break
			}
		}
	}
	b.live = snap
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
	names := b.keys()
	for i, k := range names {
		// The definition in effect is encoded in the record's own pass
		// (out.Object hides rec.Object, and is the last field as it is),
		// not marshalled apart and then compacted again as raw JSON.
		rec, _ := b.lookup(parseKey(k))
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
	if len(names) > 0 {
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
	data, _ := json.Marshal(specOf(obj)) // plain data types: cannot fail
	return sha256.Sum256(data)
}

// specOf is obj's spec (obj itself for a kind without one).
func specOf(obj v1alpha1.Object) any {
	switch o := obj.(type) {
	case *v1alpha1.Member:
		return o.Spec
	case *v1alpha1.Profile:
		return o.Spec
	case *v1alpha1.Tenant:
		return o.Spec
	}
	return obj
}

// sameSpec reports whether a and b have the same spec as their digests
// tell: equal specs encode alike, so only specs that differ as values
// (nil and empty, say) are encoded to be compared.
func sameSpec(a, b v1alpha1.Object) bool {
	return reflect.DeepEqual(specOf(a), specOf(b)) || specHash(a) == specHash(b)
}

// sameObject reports whether a and b have equal content, status aside.
func sameObject(a, b v1alpha1.Object) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
