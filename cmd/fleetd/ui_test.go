package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestUI_NoOpenPrintsALinkThatLogsInOnce: `fleetd ui --no-open` prints the
// console's login link for the running fleetd; the link opens a session
// once and sends the browser on to /ui/; the primary's token is not in it.
func TestUI_NoOpenPrintsALinkThatLogsInOnce(t *testing.T) {
	t.Parallel()
	f := startFleetd(t, map[string]string{"fleet.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n"})
	info := f.info

	code, stdout, stderr := runCLI(t, append([]string{"ui", "--no-open"}, f.client...)...)
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

	if code, _, stderr := runCLI(t, "ui", "--no-open", "--server", "http://127.0.0.1:1", "--state-dir", f.stateDir); code != 1 || !strings.Contains(stderr, "cannot reach fleetd") {
		t.Errorf("fleetd ui with no fleetd: exit %d, stderr %q", code, stderr)
	}
}
