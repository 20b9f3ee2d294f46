// Package atomicfile writes files so that a reader sees either the old
// content or the new one, never a torn mix: write a temporary file in the
// same directory, fsync it, rename it over the target, fsync the directory.
// The temporary name starts with a dot, so manifest watchers ignore it.
package atomicfile
