package controllers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrStateDirLocked is returned (wrapped, with the holder's pid) when another
// fleetd already holds the state directory.
var ErrStateDirLocked = errors.New("state directory is in use by another fleetd")

// lockFileName is the lock file inside the state directory.
const lockFileName = "fleetd.lock"

// StateLock is an exclusive hold on a state directory: one daemon per state
// directory, so two instances never fight over the same panes.
type StateLock struct {
	f *os.File
}

// LockStateDir takes the exclusive lock on dir (created if missing, mode
// 0700) without waiting. If another process holds it, the error matches
// ErrStateDirLocked and names that process's pid.
func LockStateDir(dir string) (*StateLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "unknown pid"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					holder = "pid " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("%w: %s is held by %s; stop that fleetd or use another --state-dir", ErrStateDirLocked, dir, holder)
		}
		return nil, fmt.Errorf("lock state directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		_ = f.Sync()
	}
	return &StateLock{f: f}, nil
}

// Unlock releases the lock. It is safe to call more than once.
func (l *StateLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}
