package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
)

// TestSend_EndToEndWithSimulatedHerdr runs `fleetd serve --herdr=sim` in
// process and talks to it with the CLI, as a user trying fleetd would: the
// simulated agent connects to the gateway with its own pane's token and
// answers through bridge_reply, so `fleetd send reviewer hello` prints the
// echo; apply and delete go through the REST write endpoints.
func TestSend_EndToEndWithSimulatedHerdr(t *testing.T) {
	t.Parallel()
	f := startFleetd(t, map[string]string{"fleet.yaml": `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer}
spec: {profile: claude}
`})
	info, ctx, client := f.info, f.ctx, f.client
	readyMember := func(name string) func([]v1alpha1.Member) bool {
		return func(ms []v1alpha1.Member) bool {
			for _, m := range ms {
				if m.Name == name {
					return m.Status.Phase == v1alpha1.PhaseReady
				}
			}
			return false
		}
	}
	if err := info.WaitFor(ctx, readyMember("reviewer")); err != nil {
		t.Fatalf("reviewer never became Ready: %v", err)
	}

	code, stdout, stderr := runCLI(t, append([]string{"send", "reviewer", "hello"}, client...)...)
	if code != 0 || stdout != "echo: hello\n" {
		t.Fatalf("fleetd send reviewer hello: exit %d, stdout %q, want \"echo: hello\\n\"; stderr:\n%s", code, stdout, stderr)
	}

	coder := filepath.Join(t.TempDir(), "coder.yaml")
	if err := os.WriteFile(coder, []byte("apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: coder}\nspec: {profile: claude}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"member/coder created\n", "member/coder unchanged\n"} {
		if code, stdout, stderr := runCLI(t, append([]string{"apply", "-f", coder}, client...)...); code != 0 || stdout != want {
			t.Fatalf("fleetd apply: exit %d, stdout %q, want %q; stderr:\n%s", code, stdout, want, stderr)
		}
	}
	if err := info.WaitFor(ctx, readyMember("coder")); err != nil {
		t.Fatalf("coder never became Ready: %v", err)
	}
	if code, stdout, stderr := runCLI(t, append([]string{"send", "coder", "build it"}, client...)...); code != 0 || stdout != "echo: build it\n" {
		t.Fatalf("fleetd send coder: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	// The agent replies, then herdr shows its turn over (done, or idle for
	// a pane in view): a delete in between says the tab closes once it is
	// idle (TestDeleteMember); this one waits for it. The reply can come
	// before fleetd applied herdr's events of the turn, so fleetd's status
	// read now may still be the idle from before the prompt: the test
	// waits for fleetd to show done, which it does only after it applied
	// the turn's working (a pane's status events arrive in order).
	pane := f.paneOf(t, "coder")
	a, err := herdr.New(&herdr.Options{SocketPath: info.HerdrSocket}).WaitAgent(ctx, herdr.AgentWaitParams{
		Target: pane, Until: []herdr.AgentStatus{herdr.StatusIdle, herdr.StatusDone},
	})
	if err != nil {
		t.Fatalf("coder's turn never over in herdr after its reply: %v", err)
	}
	if a.AgentStatus != herdr.StatusDone {
		if err := info.Sim.SetAgentStatus(pane, string(herdr.StatusDone)); err != nil {
			t.Fatal(err)
		}
	}
	if err := info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		for _, m := range ms {
			if m.Name == "coder" {
				return m.Status.AgentStatus == string(herdr.StatusDone)
			}
		}
		return false
	}); err != nil {
		t.Fatalf("fleetd never showed coder's turn over: %v", err)
	}
	if code, stdout, stderr := runCLI(t, append([]string{"delete", "member", "coder"}, client...)...); code != 0 || stdout != "member/coder deleted\n" {
		t.Fatalf("fleetd delete member coder: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, append([]string{"delete", "member", "coder"}, client...)...); code != 1 || stderr != "fleetd delete: member \"coder\" not found\n" {
		t.Errorf("second delete: exit %d, stderr %q", code, stderr)
	}
}
