package tokens

import (
	"fmt"
	"os"
)

// checkPrivate refuses a secret file that others may read or write.
func checkPrivate(path string, fi os.FileInfo) error {
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %#o; want 0600 (chmod 600 %s)", path, perm, path)
	}
	return nil
}
