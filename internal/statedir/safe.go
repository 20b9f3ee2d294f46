package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// ErrUnsafe is matched (errors.Is) by the error of [Layout.CheckSafe].
var ErrUnsafe = errors.New("unsafe state directory")

// CheckSafe refuses a state directory somebody else could have written:
// the root must be a directory owned by the current user and not writable
// by group or others, and each file with token hashes that exists
// (primary.token, the state database, the legacy tokens.json) must be a
// regular file — not a symlink — owned by the current user and neither
// readable nor writable by group or others. Whoever can write there can
// plant a primary token of their own, or token hashes that let their token
// in; whoever can read primary.token is the primary.
//
// A root that does not exist yet passes: [Layout.Lock] creates it with
// [DirMode]. The error matches [ErrUnsafe] and names the path, what is
// wrong with it and the command that fixes it.
func (l Layout) CheckSafe() error {
	return l.checkSafe(statOS, os.Geteuid())
}

// fileStat is what the safety check reads of a path.
type fileStat struct {
	mode fs.FileMode // as os.FileMode: type bits and permissions
	uid  int
}

// statFunc stats a path; follow says whether a final symlink is followed.
// A missing path is an error matching fs.ErrNotExist.
type statFunc func(path string, follow bool) (fileStat, error)

func statOS(path string, follow bool) (fileStat, error) {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	fi, err := stat(path)
	if err != nil {
		return fileStat{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, fmt.Errorf("%s: no owner information", path)
	}
	return fileStat{mode: fi.Mode(), uid: int(st.Uid)}, nil
}

func (l Layout) checkSafe(stat statFunc, uid int) error {
	root, err := stat(l.root, true)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("check state directory %s: %w", l.root, err)
	case !root.mode.IsDir():
		return unsafeErr(l.root, "is not a directory", "use another --state-dir")
	case root.uid != uid:
		return unsafeErr(l.root, fmt.Sprintf("is owned by uid %d, not by you (uid %d)", root.uid, uid),
			"use a state directory of your own (--state-dir)")
	case root.mode.Perm()&0o022 != 0:
		return unsafeErr(l.root, fmt.Sprintf("has mode %04o: writable by group or others", root.mode.Perm()),
			"chmod 700 "+shellQuote(l.root))
	}
	for _, path := range []string{l.PrimaryToken(), l.StateDB(), l.LegacyTokens()} {
		f, err := stat(path, false)
		remove := "remove it (rm " + shellQuote(path) + ") and start fleetd again; it writes a new one"
		if path == l.StateDB() { // without it fleetd forgets the panes it ran
			remove = "if fleetd did not write it, remove it (rm " + shellQuote(path) + ") and start fleetd again: it then closes the panes it ran and starts their members afresh"
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("check token file %s: %w", path, err)
		case !f.mode.IsRegular():
			return unsafeErr(path, "is not a regular file (a symlink, say); fleetd writes its token files itself", remove)
		case f.uid != uid:
			return unsafeErr(path, fmt.Sprintf("is owned by uid %d, not by you (uid %d)", f.uid, uid), remove)
		case f.mode.Perm()&0o077 != 0:
			fix := "chmod 600 " + shellQuote(path)
			if path == l.PrimaryToken() {
				fix += ", and rotate the token: stop fleetd, remove the file, start fleetd, run `fleetd mcp-config` again"
			}
			return unsafeErr(path, fmt.Sprintf("has mode %04o: open to group or others", f.mode.Perm()), fix)
		}
	}
	return nil
}

func unsafeErr(path, what, fix string) error {
	return fmt.Errorf("%w: %s %s; fix: %s", ErrUnsafe, path, what, fix)
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
