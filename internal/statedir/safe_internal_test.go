package statedir

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// TestCheckSafe_Owners checks ownership with injected stat results: a
// test cannot make a file owned by another user without privileges.
func TestCheckSafe_Owners(t *testing.T) {
	const me, other = 1000, 1001
	l := At("/state")
	for _, tc := range []struct {
		name  string
		stats map[string]fileStat // missing: does not exist
		want  string              // in the error; "": safe
	}{
		{"all mine", map[string]fileStat{
			"/state":               {mode: fs.ModeDir | 0o700, uid: me},
			"/state/primary.token": {mode: 0o600, uid: me},
			"/state/tokens.json":   {mode: 0o600, uid: me},
		}, ""},
		{"directory owned by another user", map[string]fileStat{
			"/state": {mode: fs.ModeDir | 0o700, uid: other},
		}, "/state is owned by uid 1001, not by you (uid 1000)"},
		{"primary token owned by another user", map[string]fileStat{
			"/state":               {mode: fs.ModeDir | 0o700, uid: me},
			"/state/primary.token": {mode: 0o600, uid: other},
		}, "/state/primary.token is owned by uid 1001"},
		{"token registry owned by another user", map[string]fileStat{
			"/state":             {mode: fs.ModeDir | 0o700, uid: me},
			"/state/tokens.json": {mode: 0o600, uid: other},
		}, "/state/tokens.json is owned by uid 1001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stat := func(path string, _ bool) (fileStat, error) {
				if st, ok := tc.stats[path]; ok {
					return st, nil
				}
				return fileStat{}, fs.ErrNotExist
			}
			err := l.checkSafe(stat, me)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("checkSafe = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkSafe = %v, want ErrUnsafe saying %q", err, tc.want)
			}
		})
	}
}
