package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/atomicfile"
)

// manifestPerm is the mode of files the store writes: manifests hold no
// secrets (public intent is closed) and are shared with the operator.
const manifestPerm = 0o644

// Apply writes obj's definition atomically. An object already defined in a
// file is replaced in place (only its document, in a multi-document file);
// a new Member goes to DIR/<name>.yaml, a new Profile or Tenant to
// DIR/<kind>-<name>.yaml. The result is decoded strictly, and held to the
// size limit the watcher reads within, before anything is written, so an
// invalid object never reaches the directory. Apply waits for a scan in
// progress (or gives up when ctx ends); on return the snapshot already
// reflects the write.
func (d *Directory) Apply(ctx context.Context, obj v1alpha1.Object) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key := Key{obj.GetObjectKind(), obj.GetName()}
	doc, err := renderObject(obj)
	if err != nil {
		return fmt.Errorf("apply %s: %w", key, err)
	}
	if err := d.lock(ctx); err != nil {
		return fmt.Errorf("apply %s: %w", key, err)
	}
	defer d.unlock()
	if d.snap.DirErr != nil {
		return fmt.Errorf("apply %s: %w", key, d.snap.DirErr)
	}
	path, exists := d.snap.Sources[key]
	var data []byte
	if exists {
		old, err := d.read(path, d.maxBytes)
		if err != nil {
			return fmt.Errorf("apply %s: %w", key, err)
		}
		data, err = replaceDocument(old, key, doc)
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
		data = doc
	}
	objs, errs := decode.File(path, data)
	if len(errs) > 0 {
		return fmt.Errorf("apply %s: %w", key, errs)
	}
	found := false
	for _, o := range objs {
		found = found || (o.GetObjectKind() == key.Kind && o.GetName() == key.Name)
	}
	if !found {
		return fmt.Errorf("apply %s: internal error: rendered file does not define it", key)
	}
	if int64(len(data)) > d.maxBytes {
		return fmt.Errorf("apply %s: %s would be %d bytes, over the limit of %d bytes on a manifest file", key, path, len(data), d.maxBytes)
	}
	if err := atomicfile.Write(path, data, manifestPerm); err != nil {
		return fmt.Errorf("apply %s: %w", key, err)
	}
	d.scan()
	return nil
}

// Delete removes the object's definition: its file, or only its document
// in a multi-document file. On return the snapshot reflects the removal.
func (d *Directory) Delete(ctx context.Context, kind, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key := Key{kind, name}
	if err := d.lock(ctx); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	defer d.unlock()
	if d.snap.DirErr != nil {
		return fmt.Errorf("delete %s: %w", key, d.snap.DirErr)
	}
	path, ok := d.snap.Sources[key]
	if !ok {
		return fmt.Errorf("delete %s: %w", key, ErrNotFound)
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
		if i != idx && documentKey(doc) != (Key{}) {
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
	d.scan()
	return nil
}

// renderObject writes obj as one YAML document without the fields the
// store or the reconciler own (status, uid, generation, creationTimestamp)
// and without a resourceVersion, which a file does not keep.
func renderObject(obj v1alpha1.Object) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	delete(m, "status")
	m["apiVersion"] = v1alpha1.GroupVersion
	m["kind"] = obj.GetObjectKind()
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "uid")
		delete(meta, "generation")
		delete(meta, "creationTimestamp")
		delete(meta, "resourceVersion")
	}
	raw, err = json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return sigsyaml.JSONToYAML(raw)
}

func fileName(key Key) string {
	if key.Kind == v1alpha1.KindMember {
		return key.Name + ".yaml"
	}
	return strings.ToLower(key.Kind) + "-" + key.Name + ".yaml"
}

// replaceDocument swaps key's document in a file for doc, keeping the other
// documents byte for byte.
func replaceDocument(file []byte, key Key, doc []byte) ([]byte, error) {
	docs := splitDocuments(file)
	idx := findDocument(docs, key)
	if idx < 0 {
		return nil, fmt.Errorf("file no longer defines it")
	}
	if bytes.HasPrefix(docs[idx], []byte("---")) {
		doc = append([]byte("---\n"), doc...)
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

func findDocument(docs [][]byte, key Key) int {
	for i, doc := range docs {
		if documentKey(doc) == key {
			return i
		}
	}
	return -1
}

// documentKey reads the kind and name of one document; zero if it has none.
func documentKey(doc []byte) Key {
	var head struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return Key{}
	}
	return Key{head.Kind, head.Metadata.Name}
}
