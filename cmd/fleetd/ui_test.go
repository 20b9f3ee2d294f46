package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/daemon"
)

// TestUI_NoOpenPrintsALinkThatLogsInOnce: `fleetd ui --no-open` prints the
// console's login link for the running fleetd; the link opens a session
// once and sends the browser on to /ui/; the primary's token is not in it.
func TestUI_NoOpenPrintsALinkThatLogsInOnce(t *testing.T) {
	manifests := writeTree(t, map[string]string{"fleet.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n"})
	stateDir := t.TempDir()
	t.Setenv("FLEETD_TOKEN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{ManifestsDir: manifests, StateDir: stateDir, Listen: "127.0.0.1:0", Sim: true,
			Ready: func(i daemon.Info) { ready <- i }})
	}()
	var info daemon.Info
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("fleetd serve ended before listening: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fleetd serve: %v", err)
		}
	}()

	code, stdout, stderr := runCLI(t, "ui", "--no-open", "--server", info.URL, "--state-dir", stateDir)
	link := strings.TrimSpace(stdout)
	if code != 0 || !strings.HasPrefix(link, info.URL+"/ui/login?code=") || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("fleetd ui --no-open: exit %d, stdout %q, want one login link; stderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "once") {
		t.Errorf("stderr %q does not say the link works once", stderr)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, want := range []int{http.StatusSeeOther, http.StatusUnauthorized} {
		resp, err := noRedirect.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("visit %d of the link: %s, want %d", i+1, resp.Status, want)
		}
	}

	if code, _, stderr := runCLI(t, "ui", "--no-open", "--server", "http://127.0.0.1:1", "--state-dir", stateDir); code != 1 || !strings.Contains(stderr, "cannot reach fleetd") {
		t.Errorf("fleetd ui with no fleetd: exit %d, stderr %q", code, stderr)
	}
}
