package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// The test binary's one fleetd and one browser.
var (
	fleet struct {
		info      daemon.Info
		token     string // the primary's
		manifests string
		clock     *clock.Fake // the console's: codes expire when a test steps it
	}
	browser     context.Context // nil when there is no browser
	noBrowser   string          // why there is none
	consoleTime = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

const fleetYAML = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude, description: Claude Code worker}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: alpha}
spec: {profile: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: asker}
spec: {profile: claude}
`

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "fleetd-console-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	stop, err := startFleet(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start fleetd:", err)
		return 1
	}
	defer stop()
	closeBrowser := startBrowser(tmp)
	defer closeBrowser()
	return m.Run()
}

func startFleet(tmp string) (stop func(), err error) {
	fleet.manifests = filepath.Join(tmp, "manifests")
	state := filepath.Join(tmp, "state")
	if err := os.MkdirAll(fleet.manifests, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(fleet.manifests, "fleet.yaml"), []byte(fleetYAML), 0o644); err != nil {
		return nil, err
	}
	fleet.clock = clock.NewFake(consoleTime)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{ManifestsDir: fleet.manifests, StateDir: state, Listen: "127.0.0.1:0", Sim: true,
			SimValidator: validated.Schema(), Console: &daemon.ConsoleOptions{Clock: fleet.clock},
			Ready: func(i daemon.Info) { ready <- i }})
	}()
	select {
	case fleet.info = <-ready:
	case err := <-done:
		cancel()
		return nil, err
	}
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "fleetd:", err)
		}
	}
	tok, err := os.ReadFile(statedir.At(state).PrimaryToken())
	if err != nil {
		stop()
		return nil, err
	}
	fleet.token = strings.TrimSpace(string(tok))
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := fleet.info.WaitFor(wctx, func(ms []v1alpha1.Member) bool {
		return phaseOf(ms, "alpha") == v1alpha1.PhaseReady && phaseOf(ms, "asker") == v1alpha1.PhaseReady
	}); err != nil {
		stop()
		return nil, fmt.Errorf("the members never became Ready: %w", err)
	}
	return stop, nil
}

// chromium finds the browser: $FLEETD_CHROMIUM, then Debian's.
func chromium() (string, error) {
	if p := os.Getenv("FLEETD_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium found (looked for $FLEETD_CHROMIUM, /usr/bin/chromium, chromium, chromium-browser, google-chrome); install it with `apt-get install -y chromium`")
}

func startBrowser(tmp string) func() {
	path, err := chromium()
	if err != nil {
		noBrowser = err.Error()
		return func() {}
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(filepath.Join(tmp, "chromium")),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	// The first Run starts the browser; it lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		noBrowser = fmt.Sprintf("start %s: %v", path, err)
		return func() {}
	}
	browser = ctx
	return func() {
		cancel()
		cancelAlloc()
	}
}

// tab opens a tab in a browser context of its own (no cookies of other
// tests) for the test, or skips (fails under CI=true) without a browser.
func tab(t *testing.T) context.Context {
	t.Helper()
	if browser == nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no browser: %s", noBrowser)
		}
		t.Skipf("skipped: no browser to drive (%s); under CI=true this fails", noBrowser)
	}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, 45*time.Second)
	t.Cleanup(cancelTimeout)
	return ctx
}

// mintCode asks fleetd for a login code as `fleetd ui` does and returns the
// login path.
func mintCode(t *testing.T) (path, code string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fleet.info.URL+"/ui/codes", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+fleet.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /ui/codes: %s %s", resp.Status, body)
	}
	var out struct{ Code, Path string }
	if err := jsonUnmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Path, out.Code
}

// login logs the tab in with a fresh code and lands on the overview.
func login(t *testing.T, ctx context.Context) {
	t.Helper()
	path, _ := mintCode(t)
	do(t, ctx, chromedp.Navigate(fleet.info.URL+path), chromedp.WaitVisible(chromedp.CSS("#live")))
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

func phaseOf(ms []v1alpha1.Member, name string) string {
	for _, m := range ms {
		if m.Name == name {
			return m.Status.Phase
		}
	}
	return ""
}

func member(ms []v1alpha1.Member, name string) (v1alpha1.Member, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return v1alpha1.Member{}, false
}

// waitMember waits until cond holds for the named member.
func waitMember(t *testing.T, ctx context.Context, name string, cond func(v1alpha1.Member) bool) v1alpha1.Member {
	t.Helper()
	var got v1alpha1.Member
	err := fleet.info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		m, ok := member(ms, name)
		got = m
		return ok && cond(m)
	})
	if err != nil {
		t.Fatalf("member %s never reached the state the test waits for (last %+v): %v", name, got.Status, err)
	}
	return got
}

// names counts the members the tests create, so that each run of a test
// (go test -count=N runs them in one fleetd) makes new ones.
var names atomic.Int64

// unique returns base with a number no other call got.
func unique(base string) string { return fmt.Sprintf("%s-%d", base, names.Add(1)) }

// applyMember creates a Member of profile claude through the REST API.
func applyMember(t *testing.T, name string) {
	t.Helper()
	restPost(t, "/members", "application/yaml", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: "+name+"}\nspec: {profile: claude}\n")
}

// restPost writes to fleetd's REST API as the primary.
func restPost(t *testing.T, path, contentType, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fleet.info.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+fleet.token)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s %s", path, resp.Status, b)
	}
}
