package herdr

import "path/filepath"

// ResolveSocketPath returns the socket path herdr itself would use, given an
// environment lookup (os.Getenv) and the user's home directory:
//
//  1. $HERDR_SOCKET_PATH if set;
//  2. HERDR_SESSION=<name> → <cfg>/sessions/<name>/herdr.sock ("default" is
//     the default session);
//  3. <cfg>/herdr.sock,
//
// where <cfg> is $XDG_CONFIG_HOME/herdr when XDG_CONFIG_HOME is an absolute
// path, else <home>/.config/herdr (on macOS too).
func ResolveSocketPath(getenv func(string) string, home string) string {
	if p := getenv("HERDR_SOCKET_PATH"); p != "" {
		return p
	}
	cfg := filepath.Join(home, ".config", "herdr")
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		cfg = filepath.Join(x, "herdr")
	}
	if s := getenv("HERDR_SESSION"); s != "" && s != "default" {
		return filepath.Join(cfg, "sessions", s, "herdr.sock")
	}
	return filepath.Join(cfg, "herdr.sock")
}
