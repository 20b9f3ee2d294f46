// Package filekind names a file's type for a person, in the errors that
// refuse a file that is not a regular one (a manifest, a state file): "a
// directory", "a named pipe (FIFO)", "a character device". It only reads
// the mode it is given: it never touches the file system.
package filekind
