package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Limits of one git call.
const (
	// Timeout bounds every git call, whatever its context allows, but
	// the ones that write a checkout.
	Timeout = 30 * time.Second
	// CheckoutTimeout bounds a call that writes or deletes a checkout
	// (AddWorktree, RemoveWorktree): a large repository takes a while.
	CheckoutTimeout = 5 * time.Minute
	// MaxOutput bounds what one call may print (its stdout); a command
	// that prints more fails with ErrOutputLimit.
	MaxOutput = 1 << 20
	// maxStderr bounds the part of git's error output an error carries.
	maxStderr = 2 << 10
)

var (
	// ErrNotRepository matches the error of a call in a directory that is
	// not in a git repository, or does not exist.
	ErrNotRepository = errors.New("not a git repository")
	// ErrNoGit matches the error of every call when no git is installed.
	ErrNoGit = errors.New("git is not installed (no git on $PATH)")
	// ErrOutputLimit matches the error of a call that printed more than
	// MaxOutput bytes.
	ErrOutputLimit = errors.New("git printed more than the output limit")
)

// Error is a git command that failed: where it ran, its arguments, its exit
// code (-1 when it did not exit on its own) and the start of what it
// printed on stderr.
type Error struct {
	Dir    string
	Args   []string
	Code   int
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s (in %s): %s", strings.Join(e.Args, " "), e.Dir, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes a failure in a directory that is no repository match
// ErrNotRepository.
func (e *Error) Is(target error) bool {
	if target != ErrNotRepository {
		return false
	}
	s := e.Stderr
	return strings.Contains(s, "not a git repository") || strings.Contains(s, "cannot change to")
}

// hiddenEnv are the variables that would make git work on another
// repository than the one a call names.
var hiddenEnv = []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
	"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_CEILING_DIRECTORIES"}

func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "LC_ALL", name == "GIT_TERMINAL_PROMPT", name == "GIT_OPTIONAL_LOCKS":
		case strings.HasPrefix(name, "GIT_") && contains(hiddenEnv, name):
		default:
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkValue refuses a value git could take for an option, or that no
// path or ref name may hold.
func checkValue(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("git %s: empty", what)
	case strings.HasPrefix(v, "-"):
		return fmt.Errorf("git %s %q: starts with '-', which git would read as an option", what, v)
	case strings.ContainsRune(v, 0):
		return fmt.Errorf("git %s %q: holds a NUL", what, v)
	}
	return nil
}

// Run runs git in dir with args and returns its output without the final
// newline: the one exec of git, bounded like every call here, for a command
// this package has no function for. args are the caller's fixed list; the
// values in it must be checked by the caller. fleetd's own code uses the
// functions above; the fake herdr uses Run for what herdr does and fleetd
// never does (worktree.remove with force).
func Run(ctx context.Context, dir string, args ...string) (string, error) {
	return output(ctx, dir, args...)
}

// run runs git in dir and returns its stdout, at most MaxOutput bytes.
func run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return runFor(ctx, Timeout, dir, args...)
}

// runFor is run bounded by timeout instead.
func runFor(ctx context.Context, timeout time.Duration, dir string, args ...string) ([]byte, error) {
	var out boundedBuffer
	if err := stream(ctx, timeout, dir, &out, args...); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// output runs git in dir and returns its stdout without the final newline.
func output(ctx context.Context, dir string, args ...string) (string, error) {
	b, err := run(ctx, dir, args...)
	return strings.TrimSuffix(string(b), "\n"), err
}

// stream runs git in dir ("git -C dir ARGS…") with its stdout going to w,
// for at most timeout.
func stream(ctx context.Context, timeout time.Duration, dir string, w io.Writer, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := checkValue("directory", dir); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = environ()
	cmd.Stdin = nil
	cmd.Stdout = w
	var stderr boundedBuffer
	stderr.limit = maxStderr
	stderr.truncate = true
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second // a child that keeps the pipes open must not hold the call
	err := cmd.Run()
	if o, ok := w.(interface{ overflowed() bool }); ok && o.overflowed() {
		return fmt.Errorf("git %s (in %s): %w (%d bytes)", strings.Join(args, " "), dir, ErrOutputLimit, MaxOutput)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("git %s: %w", args[0], ErrNoGit)
	}
	gerr := &Error{Dir: dir, Args: args, Code: -1, Stderr: stderr.String(), Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		gerr.Code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		gerr.Err = fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return gerr
}

// boundedBuffer keeps at most limit bytes (MaxOutput when 0): over it, a
// write fails with ErrOutputLimit (so git's stdout pipe breaks and the call
// fails), or, with truncate, the rest is dropped. It has no ReadFrom, so
// that io.Copy goes through Write.
type boundedBuffer struct {
	buf      bytes.Buffer
	limit    int
	truncate bool
	over     bool
}

func (b *boundedBuffer) overflowed() bool { return b.over }

func (b *boundedBuffer) Bytes() []byte  { return b.buf.Bytes() }
func (b *boundedBuffer) String() string { return b.buf.String() }
func (b *boundedBuffer) Len() int       { return b.buf.Len() }

func (b *boundedBuffer) Write(p []byte) (int, error) {
	limit := b.limit
	if limit == 0 {
		limit = MaxOutput
	}
	room := limit - b.buf.Len()
	if len(p) <= room {
		return b.buf.Write(p)
	}
	if room > 0 {
		b.buf.Write(p[:room])
	}
	if b.truncate {
		return len(p), nil
	}
	b.over = true
	return 0, ErrOutputLimit
}
