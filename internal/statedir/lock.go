package statedir

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked is returned (wrapped, with the holder's pid) when another
// fleetd already holds the state directory.
var ErrLocked = errors.New("state directory is in use by another fleetd")

// Lock is an exclusive hold on a state directory: one daemon per state
// directory, so that two never fight over the same panes, tokens or
// journal.
type Lock struct {
	f *os.File
}

// Lock creates the root if it is missing ([Layout.Create]) and takes the
// exclusive lock on it without waiting, writing this process's pid into
// [Layout.LockFile]. If another process (or another Lock in this one)
// holds it, the error matches [ErrLocked] and names the holder's pid.
func (l Layout) Lock() (*Lock, error) {
	if err := l.Create(); err != nil {
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	path := l.LockFile()
	f, err := Open(path, os.O_RDWR|os.O_CREATE, MaxLockBytes)
	if err != nil {
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "unknown pid"
			if b, rerr := ReadFile(path, MaxLockBytes); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					holder = "pid " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("%w: %s is held by %s; stop that fleetd or use another --state-dir", ErrLocked, l.root, holder)
		}
		return nil, fmt.Errorf("lock state directory %s: %w", l.root, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		_ = f.Sync()
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock. It is safe to call more than once, and on nil.
func (k *Lock) Unlock() error {
	if k == nil || k.f == nil {
		return nil
	}
	f := k.f
	k.f = nil
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}
