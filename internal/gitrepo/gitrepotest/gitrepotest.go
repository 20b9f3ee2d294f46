package gitrepotest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Repo creates a git repository in a new temporary directory, with one
// commit (README) on branch main, and returns its path (symbolic links
// resolved, as git reports paths).
func Repo(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(dir, "repo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "init", "--quiet", "--initial-branch=main")
	Commit(t, dir, "README", "a throwaway repository\n", "initial commit")
	return dir
}

// Commit writes content to file (relative to dir) and commits it with
// subject msg.
func Commit(t testing.TB, dir, file, content, msg string) {
	t.Helper()
	Write(t, dir, file, content)
	Git(t, dir, "add", "--", file)
	Git(t, dir, "commit", "--quiet", "-m", msg)
}

// Write writes content to file (relative to dir) without committing it.
func Write(t testing.TB, dir, file, content string) {
	t.Helper()
	path := filepath.Join(dir, file)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Git runs git in dir and returns its output without the final newline;
// a failure fails the test.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSuffix(string(out), "\n")
}

// Env is the environment Git adds: no global or system configuration and
// a fixed identity, so that commits work on any machine.
var Env = []string{
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=fleetd test", "GIT_AUTHOR_EMAIL=test@fleetd.invalid",
	"GIT_COMMITTER_NAME=fleetd test", "GIT_COMMITTER_EMAIL=test@fleetd.invalid",
}
