package filekind

import (
	"io/fs"
	"testing"
)

// Every type a refused file can have is named, with its article.
func TestOf_NamesEveryType(t *testing.T) {
	for _, tc := range []struct {
		mode fs.FileMode
		want string
	}{
		{fs.ModeDir | 0o755, "a directory"},
		{fs.ModeNamedPipe | 0o600, "a named pipe (FIFO)"},
		{fs.ModeSocket, "a socket"},
		{fs.ModeDevice | fs.ModeCharDevice, "a character device"},
		{fs.ModeDevice, "a block device"},
		{fs.ModeSymlink | 0o777, "a symbolic link"},
		{fs.ModeIrregular, "an irregular file"},
		{0o644, "not a regular file"},
	} {
		if got := Of(tc.mode); got != tc.want {
			t.Errorf("Of(%v) = %q, want %q", tc.mode, got, tc.want)
		}
	}
}
