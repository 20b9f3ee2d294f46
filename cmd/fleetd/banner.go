package main

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/daemon"
)

// printBanner is what `fleetd serve` prints once it listens: where it
// serves, a member on a git worktree if there is one, and commands to try
// in a second terminal that run exactly as
// printed — this binary by the name the shell finds it under (its absolute
// path when `fleetd` on $PATH is another one, as under `make run`), a
// member that exists, and --server and --state-dir when they differ from
// the client commands' defaults.
func printBanner(out io.Writer, manifests string, info daemon.Info, sim bool) {
	fmt.Fprintf(out, "fleetd is serving %s on %s (MCP gateway %s; herdr %s; state %s)\n",
		info.DesiredState, info.URL, info.MCPURL, info.HerdrSocket, info.StateDir)
	var flags []string
	if info.URL != client.DefaultServer {
		flags = append(flags, "--server", info.URL)
	}
	if info.StateDir != defaultStateDir() {
		flags = append(flags, "--state-dir", info.StateDir)
	}
	self := selfCommand()
	try := [][]string{{"get", "members"}}
	if name := residentMember(info.Members); name != "" {
		try = append(try, []string{"describe", "member", name}, []string{"send", name, "hello"})
	} else if manifests != "" { // the directory store
		try = append(try, []string{"validate", manifests})
	}
	fmt.Fprintln(out, "In a second terminal, try:")
	for _, args := range try {
		fmt.Fprintln(out, "  "+shellLine(self, append(args, flags...)))
	}
	if sim {
		fmt.Fprintln(out, "(simulated agents answer every prompt with \"echo: <prompt>\" through the gateway)")
	}
	if m, ok := worktreeMember(info.Members); ok {
		w := m.Spec.Worktree
		fmt.Fprintf(out, "(%s works in a git worktree of %s on branch %s: `get members -o wide` shows its BRANCH, `describe member %s` its commits; docs/worktrees.md)\n",
			shellWord(m.Name), shellWord(w.Repo), shellWord(w.Branch), shellWord(m.Name))
	}
}

// worktreeMember is the first member, by name, with a spec.worktree.
func worktreeMember(members []v1alpha1.Member) (v1alpha1.Member, bool) {
	for _, m := range members {
		if m.Spec.Worktree != nil {
			return m, true
		}
	}
	return v1alpha1.Member{}, false
}

// residentMember is the first member, by name, that talks to this fleetd's
// own gateway (a simulated agent of a tenant's member cannot answer) and
// needs no repository (a worktree member's may not exist), or "".
func residentMember(members []v1alpha1.Member) string {
	for _, m := range members {
		if (m.Spec.MCPTarget == nil || m.Spec.MCPTarget.Kind != v1alpha1.TargetTenant) && !m.Spec.Paused && m.Spec.Worktree == nil {
			return m.Name
		}
	}
	return ""
}

// selfCommand is how a shell runs this binary: "fleetd" when that is what
// $PATH finds, else its absolute path.
func selfCommand() string {
	exe, err := fleetdExecutable()
	if err != nil {
		return "fleetd"
	}
	if found, err := exec.LookPath("fleetd"); err == nil {
		if abs, err := filepath.Abs(found); err == nil {
			if resolved, err := filepath.EvalSymlinks(abs); err == nil && resolved == exe {
				return "fleetd"
			}
		}
	}
	return exe
}

// shellLine joins a command line for a POSIX shell, quoting what needs it.
func shellLine(name string, args []string) string {
	words := []string{shellWord(name)}
	for _, a := range args {
		words = append(words, shellWord(a))
	}
	return strings.Join(words, " ")
}

func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
