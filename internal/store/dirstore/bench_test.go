package dirstore

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkNew_Restart: New over n members' files whose records an earlier
// New left in the state directory — the directory store's part of a
// `fleetd serve` restart, which reads every file it has not read before
// and seeds each with the objects recorded for it.
func BenchmarkNew_Restart(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			dir, state := b.TempDir(), b.TempDir()
			files := map[string]string{"profile.yaml": profileDoc}
			for i := range n {
				name := fmt.Sprintf("m%04d", i)
				files[name+".yaml"] = memberDoc(name, "codex-fast")
			}
			for f, content := range files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			opts := &Options{StateDir: state, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if _, err := New(dir, opts); err != nil { // the first start writes the records
				b.Fatal(err)
			}
			for b.Loop() {
				d, err := New(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				if got := len(d.Snapshot().Members); got != n {
					b.Fatalf("%d members after the restart, want %d", got, n)
				}
			}
		})
	}
}
