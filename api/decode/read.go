package decode

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/fleetd-dev/fleetd/internal/filekind"
)

// DefaultMaxManifestBytes is the size limit on one manifest file unless the
// operator sets another (`fleetd serve` and `fleetd validate` take
// --max-manifest-bytes). The largest real manifest is a few KiB; the limit
// is there so that a runaway file costs a bounded amount of memory.
const DefaultMaxManifestBytes = 4 << 20

// ReadManifest reads the manifest file at path, at most limit bytes of it
// (limit <= 0 means [DefaultMaxManifestBytes]). It is the one rule for
// which files fleetd reads, shared by the store's watcher and `fleetd
// validate`, and it never blocks or reads without bound:
//
//   - Only a regular file, or a symbolic link that resolves to one, is
//     read. A directory, named pipe, socket or device — or a link to one,
//     such as a link to /dev/zero — is refused before it is opened.
//   - A file whose size is over limit is refused before it is opened.
//   - The file is opened with O_NONBLOCK, so a regular file swapped for a
//     named pipe between the check and the open cannot block the open; the
//     opened descriptor is checked again (fstat) before anything is read,
//     and at most limit+1 bytes are read, so a file that grows, or lies
//     about its size, is refused once it passes the limit.
//
// The error is a *[Error] naming path that says what the file is and why
// it was skipped. It matches [fs.ErrNotExist] only when path itself is gone
// (removed since it was listed); a symbolic link whose target is missing is
// reported as such instead.
func ReadManifest(path string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxManifestBytes
	}
	lst, err := os.Lstat(path)
	if err != nil {
		return nil, readError(path, err)
	}
	st, link := lst, ""
	if lst.Mode()&fs.ModeSymlink != 0 {
		link, _ = os.Readlink(path)
		if st, err = os.Stat(path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, &Error{File: path, Msg: fmt.Sprintf("a symbolic link to %s, which does not exist; skipped", link)}
			}
			return nil, readError(path, err)
		}
	}
	if err := checkManifestFile(path, link, st, limit); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, readError(path, err)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, readError(path, err)
	}
	if err := checkManifestFile(path, link, st, limit); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, readError(path, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(path, -1, limit)
	}
	return data, nil
}

// checkManifestFile refuses st (what path, or the link at path to target,
// resolves to) unless it is a regular file of at most limit bytes.
func checkManifestFile(path, target string, st fs.FileInfo, limit int64) error {
	if !st.Mode().IsRegular() {
		what := "not a regular file but " + filekind.Of(st.Mode())
		if target != "" {
			what = fmt.Sprintf("a symbolic link to %s, which is %s, not a regular file", target, filekind.Of(st.Mode()))
		}
		return &Error{File: path, Msg: what + "; skipped: fleetd reads only regular files and symbolic links to them"}
	}
	if st.Size() > limit {
		return tooLarge(path, st.Size(), limit)
	}
	return nil
}

// tooLarge is the error for a file over limit; size < 0 when only "more
// than limit" is known.
func tooLarge(path string, size, limit int64) *Error {
	is := fmt.Sprintf("%d bytes", size)
	if size < 0 {
		is = fmt.Sprintf("more than %d bytes", limit)
	}
	return &Error{File: path, Msg: fmt.Sprintf(
		"file is %s, over the limit of %d bytes on a manifest file; skipped: split it, or raise --max-manifest-bytes", is, limit)}
}

// readError is the error for a failed file-system call on path. It keeps
// err as its cause, so that errors.Is(…, fs.ErrNotExist) still holds.
func readError(path string, err error) *Error {
	cause := err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		cause = pe.Err // the path is named once, as the Error's File
	}
	return &Error{File: path, Msg: "cannot read: " + cause.Error(), cause: err}
}
