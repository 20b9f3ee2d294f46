package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// processConfig describes the whole-process measurement.
type processConfig struct {
	binary  string
	members int
	latency time.Duration
	timeout time.Duration
}

// procFigures are one fleetd process's figures once its fleet is Ready,
// and those of the fleetd started after it on the same state directory and
// herdr (adopt), when the fleet has members.
type procFigures struct {
	converge         time.Duration
	rssKiB, peakKiB  float64
	goroutines, heap float64
	// adopt is how long the fleetd started after this one took until
	// every member was Ready again, adopted; adoptPeakKiB its peak RSS.
	adopt        time.Duration
	adoptPeakKiB float64
}

// settle is how long the figures are taken after the fleet is Ready, so
// that the transient work of convergence (resubscription, status writes)
// is over.
const settle = 2 * time.Second

// measureProcess runs fleetd with no members and with cfg.members (then a
// second fleetd that adopts them), and a bare client converging the same
// members, and returns their figures as rows: convergence against the bare
// client, memory and goroutines against the empty fleetd, adoption against
// the empty fleetd's start.
func measureProcess(ctx context.Context, cfg processConfig) ([]row, error) {
	empty, err := runFleetd(ctx, cfg, 0)
	if err != nil {
		return nil, fmt.Errorf("fleetd with no members: %w", err)
	}
	full, err := runFleetd(ctx, cfg, cfg.members)
	if err != nil {
		return nil, fmt.Errorf("fleetd with %d members: %w", cfg.members, err)
	}
	bare, err := runBare(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bare client with %d members: %w", cfg.members, err)
	}
	return processRows(cfg.members, full, empty, bare), nil
}

// processRows are the whole-process rows: fleetd's convergence next to the
// bare client's (bare), its memory and goroutines next to an empty
// fleetd's, and the restart that adopts the fleet next to the empty
// fleetd's start.
func processRows(members int, full, empty procFigures, bare time.Duration) []row {
	bench := fmt.Sprintf("Process/members=%d", members)
	adopt := fmt.Sprintf("Process/adopt=%d", members)
	const mib = 1024
	return []row{
		{Bench: bench, Figure: "converge-ms", Value: ms(full.converge), Base: ms(bare), HasBase: true},
		{Bench: bench, Figure: "rss-MiB", Value: full.rssKiB / mib, Base: empty.rssKiB / mib, HasBase: true},
		{Bench: bench, Figure: "peak-rss-MiB", Value: full.peakKiB / mib, Base: empty.peakKiB / mib, HasBase: true},
		{Bench: bench, Figure: "peak-rss-KiB/member", Value: (full.peakKiB - empty.peakKiB) / float64(members)},
		{Bench: bench, Figure: "heap-inuse-MiB", Value: full.heap / (1 << 20), Base: empty.heap / (1 << 20), HasBase: true},
		{Bench: bench, Figure: "goroutines", Value: full.goroutines, Base: empty.goroutines, HasBase: true},
		{Bench: adopt, Figure: "ready-ms", Value: ms(full.adopt), Base: ms(empty.converge), HasBase: true},
		{Bench: adopt, Figure: "peak-rss-MiB", Value: full.adoptPeakKiB / mib, Base: empty.peakKiB / mib, HasBase: true},
	}
}

// runBare converges cfg.members members on a fresh fake herdr (the same
// latency) with a bare herdr client, and returns how long it took.
func runBare(ctx context.Context, cfg processConfig) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	fake, err := validated.Start(nil)
	if err != nil {
		return 0, err
	}
	defer fake.Close()
	if cfg.latency > 0 {
		fake.InjectFault("", herdrsim.Fault{Latency: cfg.latency})
	}
	start := time.Now()
	if err := bareConverge(ctx, herdr.New(&herdr.Options{SocketPath: fake.SocketPath()}), cfg.members, herdr.DefaultPollInterval); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// bareConverge makes only the herdr calls n members strictly need, every
// member at once: one workspace, then per member (one goroutine each)
// tab.create with fleetd's tab label and agent.start with the members'
// profile, polling agent.get every poll until the agent is ready, as
// herdr's CLI does (`fleetd serve` polls as often by default).
func bareConverge(ctx context.Context, c *herdr.Client, n int, poll time.Duration) error {
	ws, err := c.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "fleetd"})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			name := memberName(i)
			tab, err := c.CreateTab(ctx, herdr.TabCreateParams{WorkspaceID: ws.Workspace.WorkspaceID, Label: controllers.TabLabelPrefix + name})
			if err == nil {
				_, err = c.StartAgent(ctx, herdr.AgentStartParams{
					Name: name, Kind: "codex", PaneID: tab.RootPane.PaneID, Args: []string{"-m", "bench"},
					TimeoutMS: v1alpha1.DefaultStartupTimeout.Milliseconds(),
				}, poll)
			}
			if err != nil {
				err = fmt.Errorf("member %s: %w", name, err)
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// memberName is the name of the i-th member, as in the manifests.
func memberName(i int) string { return fmt.Sprintf("m%04d", i) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

const profileYAML = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: bench}
spec:
  harness: codex
  args: ["-m", "bench"]
`

// servingLine is the line `fleetd serve` prints once it listens.
var servingLine = regexp.MustCompile(` on (http://[^ ]+) \(`)

// runFleetd serves n members with the fleetd binary against a fake herdr
// in this process and measures it once every member is Ready; then, with
// members, it stops that fleetd (SIGTERM: the agents keep running) and
// measures a second one on the same state directory and herdr until it has
// adopted them all — without a tab created or an agent started.
func runFleetd(ctx context.Context, cfg processConfig, n int) (procFigures, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	root, err := os.MkdirTemp("", "fleetd-bench")
	if err != nil {
		return procFigures{}, err
	}
	defer os.RemoveAll(root)
	manifests, state := filepath.Join(root, "manifests"), filepath.Join(root, "state")
	if err := writeManifests(manifests, n); err != nil {
		return procFigures{}, err
	}
	fake, err := validated.Start(&herdrsim.Options{SocketPath: filepath.Join(root, "herdr.sock")})
	if err != nil {
		return procFigures{}, err
	}
	defer fake.Close()
	if cfg.latency > 0 {
		fake.InjectFault("", herdrsim.Fault{Latency: cfg.latency})
	}
	args := []string{"serve", "--herdr-socket", fake.SocketPath(), "--manifests", manifests, "--state-dir", state, "--listen", "127.0.0.1:0", "--log-level", "error"}

	start := time.Now()
	first, err := startFleetd(ctx, cfg.binary, args, state)
	if err != nil {
		return procFigures{}, err
	}
	defer first.stop()
	if err := first.waitReady(ctx, n); err != nil {
		return procFigures{}, err
	}
	seen := time.Now()
	fig := procFigures{converge: seen.Sub(start)}
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		return procFigures{}, ctx.Err()
	}
	if fig.rssKiB, fig.peakKiB, err = memory(first.cmd.Process.Pid); err != nil {
		return procFigures{}, err
	}
	metrics, err := first.metrics(ctx, "go_goroutines", "go_memstats_heap_inuse_bytes")
	if err != nil {
		return procFigures{}, err
	}
	fig.goroutines, fig.heap = metrics[0], metrics[1]
	if n == 0 {
		return fig, nil
	}
	// The scrapes see the fleet Ready up to scrapePoll late; the members'
	// Started events say when it was. Asked once the memory is measured.
	last, err := first.api.lastStarted(ctx, n)
	if err != nil {
		return procFigures{}, err
	}
	if last.Before(start) || last.After(seen) {
		return procFigures{}, fmt.Errorf("the last member's agent started at %s, outside the %s from fleetd's start to the scrape that saw every member Ready",
			last.Format(time.RFC3339Nano), seen.Sub(start).Round(time.Millisecond))
	}
	fig.converge = last.Sub(start)

	if err := first.stop(); err != nil {
		return procFigures{}, fmt.Errorf("stop the first fleetd: %w", err)
	}
	before := fake.Calls()
	start = time.Now()
	second, err := startFleetd(ctx, cfg.binary, args, state)
	if err != nil {
		return procFigures{}, err
	}
	defer second.stop()
	if err := second.waitReady(ctx, n); err != nil {
		return procFigures{}, fmt.Errorf("adopting: %w", err)
	}
	fig.adopt = time.Since(start)
	after := fake.Calls()
	for _, m := range []string{"tab.create", "agent.start", "tab.close"} {
		if after[m] != before[m] {
			return procFigures{}, fmt.Errorf("the restarted fleetd called %s %d times: it did not adopt every pane", m, after[m]-before[m])
		}
	}
	if _, fig.adoptPeakKiB, err = memory(second.cmd.Process.Pid); err != nil {
		return procFigures{}, err
	}
	return fig, nil
}

// writeManifests writes the bench Profile and n members into dir.
func writeManifests(dir string, n int) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{"profile.yaml": profileYAML}
	for i := range n {
		name := memberName(i)
		files[name+".yaml"] = "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + name + "}\nspec:\n  profile: bench\n"
	}
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// fleetdProc is a `fleetd serve` process and its REST API.
type fleetdProc struct {
	cmd     *exec.Cmd
	api     *apiClient
	stopped bool
	waitErr error // Wait's result, once stopped
}

// startFleetd runs the fleetd binary with args and returns once it listens.
func startFleetd(ctx context.Context, binary string, args []string, state string) (*fleetdProc, error) {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stderr = os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &fleetdProc{cmd: cmd}
	base, err := serveURL(stdout)
	if err != nil {
		p.stop()
		return nil, err
	}
	token, err := os.ReadFile(statedir.At(state).PrimaryToken())
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("primary token: %w", err)
	}
	p.api = &apiClient{base: base, token: strings.TrimSpace(string(token))}
	return p, nil
}

// stop ends the process with SIGTERM and waits for it; called again, it
// returns the first result.
func (p *fleetdProc) stop() error {
	if !p.stopped {
		p.stopped = true
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.waitErr = p.cmd.Wait()
	}
	return p.waitErr
}

func (p *fleetdProc) waitReady(ctx context.Context, n int) error { return p.api.waitReady(ctx, n) }

func (p *fleetdProc) metrics(ctx context.Context, names ...string) ([]float64, error) {
	return p.api.metrics(ctx, names...)
}

// serveURL reads fleetd's standard output until it names its listener, and
// drains the rest in the background.
func serveURL(stdout io.Reader) (string, error) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stdout)
			return m[1], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("fleetd exited before it listened")
}

// memory reads a process's resident and peak resident set (KiB).
func memory(pid int) (rss, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, err = strconv.ParseFloat(f[1], 64)
		case "VmHWM:":
			peak, err = strconv.ParseFloat(f[1], 64)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, f[0], err)
		}
	}
	return rss, peak, nil
}

// plainClient asks for uncompressed answers: a gzip writer fleetd keeps
// for the measurement's own scrapes would count in its memory.
var plainClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// apiClient reads fleetd's REST API as the primary.
type apiClient struct {
	base, token string
}

func (a *apiClient) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := plainClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", path, resp.Status, b)
	}
	return b, nil
}

// waitReady polls fleetd until /readyz answers, every readyPoll (it costs
// fleetd next to nothing), then until n members are Ready, every
// scrapePoll: fleetd_members{phase="Ready"} on /metrics, where a GET
// /members as often would have fleetd encode the whole fleet each time. A
// scrape costs fleetd about 1.5 ms of CPU at 1000 members (the rollout
// gauges count every member), so it sees the fleet Ready up to scrapePoll
// late (lastStarted says when it was): asked every 5 ms over the last
// tenth of a convergence, the scrapes added a quarter of a second to
// fleetd's CPU.
func (a *apiClient) waitReady(ctx context.Context, n int) error {
	wait := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		if _, err := a.get(ctx, "/readyz"); err == nil {
			break
		}
		if err := wait(readyPoll); err != nil {
			return fmt.Errorf("fleetd not ready: %w", err)
		}
	}
	for n > 0 {
		v, err := a.metrics(ctx, `fleetd_members{phase="Ready"}`)
		if err != nil {
			return err
		}
		if int(v[0]) == n {
			break
		}
		if err := wait(scrapePoll); err != nil {
			return fmt.Errorf("%v of %d members Ready: %w", v[0], n, err)
		}
	}
	return nil
}

// lastStarted returns when fleetd saw the agent of the last of its n
// members ready: the latest of their Started events, which fleetd records
// (on this machine's clock, to the nanosecond) as it marks the member
// Ready. A member's Ready condition has it to the second only.
func (a *apiClient) lastStarted(ctx context.Context, n int) (time.Time, error) {
	var last time.Time
	for i := range n {
		name := memberName(i)
		b, err := a.get(ctx, "/members/"+name+"/events")
		if err != nil {
			return time.Time{}, err
		}
		var events []v1alpha1.Event
		if err := json.Unmarshal(b, &events); err != nil {
			return time.Time{}, fmt.Errorf("events of member %s: %w", name, err)
		}
		started := false
		for _, e := range events {
			if e.Reason == v1alpha1.ReasonStarted {
				started = true
				if e.Time.After(last) {
					last = e.Time
				}
			}
		}
		if !started {
			return time.Time{}, fmt.Errorf("member %s is Ready without a %s event", name, v1alpha1.ReasonStarted)
		}
	}
	return last, nil
}

// The intervals of waitReady.
const (
	readyPoll  = 5 * time.Millisecond
	scrapePoll = 100 * time.Millisecond
)

// metrics returns the values of series from GET /metrics, each named as
// the exposition writes it (with its labels, if any).
func (a *apiClient) metrics(ctx context.Context, names ...string) ([]float64, error) {
	b, err := a.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	found := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				found[f[0]] = v
			}
		}
	}
	out := make([]float64, len(names))
	for i, n := range names {
		v, ok := found[n]
		if !ok {
			return nil, fmt.Errorf("GET /metrics: no %s", n)
		}
		out[i] = v
	}
	return out, nil
}
