package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
)

// checkManifestsDir refuses to start on a manifests directory that is
// missing, not a directory or unreadable: the watcher would keep an empty
// desired state and say so only in a log line. Once running, a directory
// that goes away keeps every object as last read (package store).
func checkManifestsDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("manifests directory: %w; create it, or point --manifests at your manifests", err)
	}
	defer f.Close()
	if _, err := f.ReadDir(1); err != nil {
		if fi, serr := f.Stat(); serr == nil && !fi.IsDir() {
			return fmt.Errorf("manifests directory: %s is not a directory; point --manifests at the directory holding your manifests", dir)
		}
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("manifests directory: cannot read %s: %w", dir, err)
		}
	}
	return nil
}

// logHerdrCalls logs every herdr call at debug (method, outcome, time
// taken) and then passes it to next, the metrics observer. It sees no
// parameters, so no token or environment can reach the log.
func logHerdrCalls(log *slog.Logger, next func(method, code string, d time.Duration)) func(method, code string, d time.Duration) {
	return func(method, code string, d time.Duration) {
		log.Debug("herdr call", "method", method, "result", code, "took", d)
		next(method, code, d)
	}
}
