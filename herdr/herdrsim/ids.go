package herdrsim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// idAlphabet is herdr's bijective base-32 digit set (src/workspace.rs): no
// I, L, O, U; "0" is the digit for 32.
const idAlphabet = "123456789ABCDEFGHJKMNPQRSTVWXYZ0"

// encodeNumber renders n ≥ 1 in bijective base 32: 1→"1", 10→"A", 32→"0",
// 33→"11".
func encodeNumber(n int) string {
	if n < 1 {
		panic(fmt.Sprintf("herdrsim: id number %d < 1", n))
	}
	var b []byte
	for n > 0 {
		n--
		b = append(b, idAlphabet[n%32])
		n /= 32
	}
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

func workspaceID(n int) string       { return "w" + encodeNumber(n) }
func tabID(ws string, n int) string  { return ws + ":t" + encodeNumber(n) }
func paneID(ws string, n int) string { return ws + ":p" + encodeNumber(n) }
func terminalID(micros int64, counter uint64) string {
	return "term_" + strconv.FormatInt(micros, 16) + strconv.FormatUint(counter, 16)
}

// agentNamePattern is herdr's rule for agent names (agent.start, agent.rename).
var agentNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// agentKinds maps every accepted kind spelling (lower case) to herdr's
// canonical kind; executables maps a canonical kind to the program typed into
// the pane where it differs from the kind.
var (
	agentKinds = func() map[string]string {
		m := map[string]string{"claude-code": "claude", "cursor-agent": "cursor", "kiro-cli": "kiro"}
		for _, k := range strings.Fields("pi claude codex gemini cursor devin agy cline omp mastracode opencode copilot kimi kiro droid amp grok hermes kilo qodercli maki") {
			m[k] = k
		}
		return m
	}()
	executables = map[string]string{"cursor": "cursor-agent", "kiro": "kiro-cli"}
	// agentKinds22 are the kinds herdr 0.9 (protocol 22) added.
	agentKinds22 = map[string]string{"qwen": "qwen", "qwen-code": "qwen"}
)

// agentKind resolves a kind spelling to herdr's canonical kind for the
// protocol the fake speaks.
func (s *Server) agentKind(spelling string) (string, bool) {
	k := strings.ToLower(spelling)
	if kind, ok := agentKinds[k]; ok {
		return kind, true
	}
	if kind, ok := agentKinds22[k]; ok && s.p22() {
		return kind, true
	}
	return "", false
}

// shellQuote quotes one argv word for a POSIX shell the way a careful typist
// would: bare when it is made only of safe characters, single-quoted
// otherwise.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
