package dirstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/encode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/store"
	"github.com/fleetd-dev/fleetd/internal/yamledit"
)

// manifestPerm is the mode of files the store writes: manifests hold no
// secrets (public intent is closed) and are shared with the operator.
const manifestPerm = 0o644

// Apply writes obj's definition atomically. An object already defined in a
// file is edited in place (package internal/yamledit): only the fields that
// change are rewritten, and the file's comments, key order, blank lines and
// other documents stay byte for byte; a definition that is already equal
// leaves the file untouched. A new Member goes to DIR/<name>.yaml, a new
// Profile or Tenant to DIR/<kind>-<name>.yaml. Defaults are never written
// (package api/encode): a field is added only when it changes the object.
// The result is decoded strictly, checked to define exactly obj, and held
// to the size limit the watcher reads within, before anything is written,
// so an invalid object never reaches the directory. Apply waits for a scan
// in progress (or gives up when ctx ends); on return the snapshot already
// reflects the write.
func (d *Directory) Apply(ctx context.Context, obj v1alpha1.Object) error {
	return d.apply(ctx, obj, true)
}

// CheckApply makes every check [Directory.Apply] makes — the object
// decodes, its file can be edited to define exactly it, a new object's
// file name is free, the size limit — and writes nothing: a dry run
// (POST /members?dryRun=All).
func (d *Directory) CheckApply(ctx context.Context, obj v1alpha1.Object) error {
	return d.apply(ctx, obj, false)
}

func (d *Directory) apply(ctx context.Context, obj v1alpha1.Object, write bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key := store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}
	canonical, err := encode.Canonical(obj)
	if err != nil {
		return fmt.Errorf("apply %s: %w", key, err)
	}
	if err := d.lock(ctx); err != nil {
		return fmt.Errorf("apply %s: %w", key, err)
	}
	defer d.unlock()
	snap := d.hold.Input() // a held member is defined in no file
	if snap.Unreadable != nil {
		return fmt.Errorf("apply %s: %w", key, snap.Unreadable)
	}
	path, exists := snap.Sources[key]
	var old, data []byte
	if exists {
		old, err = d.read(path, d.maxBytes)
		if err != nil {
			return fmt.Errorf("apply %s: %w", key, err)
		}
		data, err = updateDocument(old, key, obj)
		if err != nil {
			return fmt.Errorf("apply %s: %s: %w", key, path, err)
		}
	} else {
		path = filepath.Join(d.dir, fileName(key))
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("apply %s: %s exists but does not define it; choose another name or edit that file", key, path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("apply %s: %w", key, err)
		}
		want, err := encode.Minimal(obj, nil)
		if err == nil {
			data, err = encode.Marshal(want)
		}
		if err != nil {
			return fmt.Errorf("apply %s: %w", key, err)
		}
	}
	objs, errs := decode.File(path, data)
	if len(errs) > 0 {
		return fmt.Errorf("apply %s: %w", key, errs)
	}
	found := false
	for _, o := range objs {
		if o.GetObjectKind() == key.Kind && o.GetName() == key.Name {
			got, err := encode.Canonical(o)
			found = err == nil && bytes.Equal(got, canonical)
		}
	}
	if !found {
		return fmt.Errorf("apply %s: internal error: the edited file does not define it as given; %s left untouched", key, path)
	}
	if int64(len(data)) > d.maxBytes {
		return fmt.Errorf("apply %s: %s would be %d bytes, over the limit of %d bytes on a manifest file", key, path, len(data), d.maxBytes)
	}
	if !write || (exists && bytes.Equal(data, old)) {
		return nil
	}
	if err := atomicfile.Write(path, data, manifestPerm); err != nil {
		return fmt.Errorf("apply %s: %w", key, err)
	}
	d.scan()
	return nil
}

// Delete removes the object's definition: its file, or only its document
// in a multi-document file. A Profile or Tenant that a Member of the
// directory references is not deleted (store.InUse). On return the
// snapshot reflects the removal: a deleted member is removed on purpose and
// never held (store.Hold), and one already held, which no file defines, is
// pruned now.
func (d *Directory) Delete(ctx context.Context, kind, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key := store.Key{Kind: kind, Name: name}
	if err := d.lock(ctx); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	defer d.unlock()
	snap := d.hold.Input()
	if snap.Unreadable != nil {
		return fmt.Errorf("delete %s: %w", key, snap.Unreadable)
	}
	path, ok := snap.Sources[key]
	if !ok {
		if kind == v1alpha1.KindMember && d.hold.Release(name) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", key, store.ErrNotFound)
	}
	if err := store.InUse(key, slices.Collect(maps.Values(d.Snapshot().Members))); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	old, err := d.read(path, d.maxBytes)
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	docs := splitDocuments(old)
	idx := findDocument(docs, key)
	if idx < 0 {
		return fmt.Errorf("delete %s: %s no longer defines it", key, path)
	}
	others := 0
	for i, doc := range docs {
		if i != idx && documentKey(doc) != (store.Key{}) {
			others++
		}
	}
	if others == 0 {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("delete %s: %w", key, err)
		}
		if err := atomicfile.SyncDir(d.dir); err != nil {
			return fmt.Errorf("delete %s: %w", key, err)
		}
	} else {
		docs = append(docs[:idx], docs[idx+1:]...)
		if len(docs) > 0 && idx == 0 {
			docs[0] = bytes.TrimPrefix(docs[0], []byte("---\n"))
		}
		if err := atomicfile.Write(path, bytes.Join(docs, nil), manifestPerm); err != nil {
			return fmt.Errorf("delete %s: %w", key, err)
		}
	}
	if kind == v1alpha1.KindMember {
		d.deleted[name] = true
	}
	d.scan()
	return nil
}

func fileName(key store.Key) string {
	if key.Kind == v1alpha1.KindMember {
		return key.Name + ".yaml"
	}
	return strings.ToLower(key.Kind) + "-" + key.Name + ".yaml"
}

// updateDocument edits key's document in a file so that it defines obj,
// keeping the other documents byte for byte. The document is edited in
// place (yamledit.Update) with the minimal definition that keeps what it
// spells out; one yamledit cannot edit faithfully (a flow-style root,
// say) is written anew from that definition, still without defaults.
func updateDocument(file []byte, key store.Key, obj v1alpha1.Object) ([]byte, error) {
	docs := splitDocuments(file)
	idx := findDocument(docs, key)
	if idx < 0 {
		return nil, fmt.Errorf("file no longer defines it")
	}
	var existing *yaml.Node
	if parsed, err := yamledit.ParseDocuments(docs[idx]); err == nil && len(parsed) == 1 && len(parsed[0].Content) == 1 {
		existing = parsed[0].Content[0]
	}
	want, err := encode.Minimal(obj, existing)
	if err != nil {
		return nil, err
	}
	doc, err := yamledit.Update(docs[idx], want)
	if err != nil {
		if doc, err = encode.Marshal(want); err != nil {
			return nil, err
		}
		if bytes.HasPrefix(docs[idx], []byte("---")) {
			doc = append([]byte("---\n"), doc...)
		}
	}
	docs[idx] = doc
	return bytes.Join(docs, nil), nil
}

// splitDocuments cuts a file before every line that starts a YAML document
// ("---"). Joining the pieces gives the file back.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	start := 0
	for i := 0; i < len(data); {
		next := len(data)
		if j := bytes.IndexByte(data[i:], '\n'); j >= 0 {
			next = i + j + 1
		}
		line := data[i:next]
		if i > start && bytes.HasPrefix(line, []byte("---")) &&
			(len(line) == 3 || strings.ContainsRune(" \t\r\n", rune(line[3]))) {
			docs = append(docs, data[start:i])
			start = i
		}
		i = next
	}
	return append(docs, data[start:])
}

func findDocument(docs [][]byte, key store.Key) int {
	for i, doc := range docs {
		if documentKey(doc) == key {
			return i
		}
	}
	return -1
}

// documentKey reads the kind and name of one document; zero if it has none.
func documentKey(doc []byte) store.Key {
	var head struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return store.Key{}
	}
	return store.Key{Kind: head.Kind, Name: head.Metadata.Name}
}
