package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data, created with mode perm.
func Write(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	ok = true
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that a rename or removal in it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// WriteThrough replaces path with data as Write does, but through spare,
// an existing file in path's directory that is no longer needed, instead
// of a new one: spare is overwritten in place and truncated, synced,
// renamed over path, and the directory synced. A crash leaves path's old
// content or the new one, as with Write, and no file is created (on most
// file systems creating one is the dearest part of a small write). spare
// keeps its mode. On failure spare is removed: what it holds is unknown.
func WriteThrough(spare, path string, data []byte) error {
	if err := overwrite(spare, data); err != nil {
		os.Remove(spare)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(spare, path); err != nil {
		os.Remove(spare)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// overwrite makes the file path hold exactly data, durably.
func overwrite(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return f.Close()
}
