package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/mcpbridge"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

func main() {
	binary := flag.String("fleetd", "", "the fleetd binary to attack (required)")
	duration := flag.Duration("duration", 10*time.Second, "how long each attack lasts")
	conns := flag.Int("conns", 520, "connections of the slow-body and held-wait attacks")
	only := flag.String("only", "", "run only the attacks whose name contains this")
	flag.Parse()
	if *binary == "" {
		fmt.Fprintln(os.Stderr, "hostile: -fleetd BINARY is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := config{binary: *binary, duration: *duration, conns: *conns}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTACK\tRSS BEFORE\tRSS PEAK\t/healthz p50\tp99\tmax\tfailed\tRESULT")
	for _, a := range attacks {
		if *only != "" && !strings.Contains(a.name, *only) {
			continue
		}
		fmt.Fprintf(os.Stderr, "hostile: %s…\n", a.name)
		row, err := a.run(ctx, cfg)
		if err != nil {
			row = result{note: "could not run: " + err.Error()}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.name, row.rss(), row.latency(), row.note)
		if ctx.Err() != nil {
			break
		}
	}
	tw.Flush()
}

type config struct {
	binary   string
	duration time.Duration
	conns    int
}

// result is one attack's figures.
type result struct {
	before, peak int64 // fleetd's resident memory, KiB; 0: not measured
	probes       []time.Duration
	failed       int // probes with no answer within probeTimeout
	note         string
}

func (r result) rss() string {
	if r.before == 0 && r.peak == 0 {
		return "-\t-"
	}
	return fmt.Sprintf("%d MiB\t%d MiB", r.before>>10, r.peak>>10)
}

func (r result) latency() string {
	if len(r.probes) == 0 {
		return "-\t-\t-\t-"
	}
	s := slices.Clone(r.probes)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("%s\t%s\t%s\t%d/%d", at(0.5).Round(time.Millisecond), at(0.99).Round(time.Millisecond),
		s[len(s)-1].Round(time.Millisecond), r.failed, len(r.probes)+r.failed)
}

type attack struct {
	name string
	run  func(ctx context.Context, cfg config) (result, error)
}

var attacks = []attack{
	{"slow bodies, no token", func(ctx context.Context, cfg config) (result, error) {
		return underAttack(ctx, cfg, func(ctx context.Context, f *fleetd) string { return slowBodies(ctx, f, cfg.conns, "") })
	}},
	{"slow bodies, a worker's token", func(ctx context.Context, cfg config) (result, error) {
		return underAttack(ctx, cfg, func(ctx context.Context, f *fleetd) string { return slowBodies(ctx, f, cfg.conns, f.workers[0]) })
	}},
	{"held waits, one worker token", func(ctx context.Context, cfg config) (result, error) {
		return underAttack(ctx, cfg, func(ctx context.Context, f *fleetd) string { return heldWaits(ctx, f, cfg.conns) })
	}},
	{"SSE injection through bare CRs", func(ctx context.Context, cfg config) (result, error) {
		return underAttack(ctx, cfg, sseInjection)
	}},
	{"console amplification", func(ctx context.Context, cfg config) (result, error) {
		return underAttack(ctx, cfg, consoleAmplification)
	}},
	{"log follows, one worker x32", func(ctx context.Context, cfg config) (result, error) {
		return underAttack(ctx, cfg, logFollows)
	}},
	{"1.5 MB annotation", func(ctx context.Context, cfg config) (result, error) {
		return underAttack(ctx, cfg, bigAnnotation)
	}},
	{"FIFO at the state database", func(ctx context.Context, cfg config) (result, error) {
		return plantedStart(ctx, cfg, func(s statedir.Layout) (string, error) {
			p := s.StateDB()
			return p, syscall.Mkfifo(p, 0o600)
		})
	}},
	{"/dev/zero at the message journal", func(ctx context.Context, cfg config) (result, error) {
		return plantedStart(ctx, cfg, func(s statedir.Layout) (string, error) {
			p := filepath.Join(s.Messages(), "messaging.journal")
			return p, os.Symlink("/dev/zero", p)
		})
	}},
}

// probeTimeout bounds one /healthz probe.
const probeTimeout = 5 * time.Second

// underAttack starts a fleetd, measures it at rest, runs attack for the
// configured duration while probing /healthz and sampling its memory, and
// returns the figures with the attack's note.
func underAttack(ctx context.Context, cfg config, attack func(ctx context.Context, f *fleetd) string) (result, error) {
	f, err := startFleetd(ctx, cfg.binary, nil)
	if err != nil {
		return result{}, err
	}
	defer f.stop()
	var r result
	r.before, _ = rssKiB(f.cmd.Process.Pid)
	actx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Go(func() { // the probes
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: probeTimeout}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for actx.Err() == nil {
			start := time.Now()
			resp, err := client.Get(f.url + "/healthz")
			d := time.Since(start)
			mu.Lock()
			if err == nil {
				resp.Body.Close()
				r.probes = append(r.probes, d)
			} else if actx.Err() == nil {
				r.failed++
			}
			mu.Unlock()
			select {
			case <-tick.C:
			case <-actx.Done():
			}
		}
	})
	wg.Go(func() { // fleetd's memory
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if kib, err := rssKiB(f.cmd.Process.Pid); err == nil {
				mu.Lock()
				r.peak = max(r.peak, kib)
				mu.Unlock()
			}
			select {
			case <-tick.C:
			case <-actx.Done():
				return
			}
		}
	})
	r.note = attack(actx, f)
	<-actx.Done()
	wg.Wait()
	return r, nil
}

// plantedStart starts a fleetd on a state directory where plant put
// something at a file fleetd reads, and says what became of it: refused at
// once, or still starting (and whether SIGTERM stops it).
func plantedStart(ctx context.Context, cfg config, plant func(statedir.Layout) (string, error)) (result, error) {
	root, err := os.MkdirTemp("", "fleetd-hostile-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(root)
	state := statedir.At(filepath.Join(root, "state"))
	for _, d := range []string{state.Root(), state.Messages()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return result{}, err
		}
	}
	os.Chmod(state.Root(), 0o700)
	path, err := plant(state)
	if err != nil {
		return result{}, err
	}
	manifests := filepath.Join(root, "manifests")
	if err := writeManifests(manifests); err != nil {
		return result{}, err
	}
	cmd := exec.CommandContext(ctx, cfg.binary, "serve", "--herdr=sim", "--manifests", manifests, "--state-dir", state.Root(), "--listen", "127.0.0.1:0", "--log-level", "error")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var r result
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(5 * time.Second)
	for {
		select {
		case err := <-exited:
			r.note = fmt.Sprintf("exits after %s (%v): %s", time.Since(start).Round(time.Millisecond), err, lastLine(stderr.String()))
			return r, nil
		case <-tick.C:
			if kib, err := rssKiB(cmd.Process.Pid); err == nil {
				r.peak = max(r.peak, kib)
				if r.before == 0 {
					r.before = kib
				}
				if kib > 512<<10 {
					cmd.Process.Kill()
					<-exited
					r.note = fmt.Sprintf("reads %s without bound: %d MiB after %s (killed)", path, kib>>10, time.Since(start).Round(time.Millisecond))
					return r, nil
				}
			}
		case <-limit:
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
				r.note = fmt.Sprintf("still starting after 5s (hangs on %s); SIGTERM stops it", path)
			case <-time.After(3 * time.Second):
				cmd.Process.Kill()
				<-exited
				r.note = fmt.Sprintf("still starting after 5s (hangs on %s); SIGTERM ignored, killed", path)
			}
			return r, nil
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// fleetd is a running fleetd process on a simulated herdr of this process.
type fleetd struct {
	cmd       *exec.Cmd
	exited    chan struct{}
	sim       *herdrsim.Server
	root      string
	manifests string
	url       string
	primary   string   // the primary's token
	workers   []string // the members' tokens, from their panes' environment
	names     []string // their member names
}

const profileYAML = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: sim}
spec: {harness: codex}
`

// memberNames are the members of every attacked fleet.
var memberNames = []string{"reviewer", "tester", "writer", "asker"}

func writeManifests(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	content := profileYAML
	for _, n := range memberNames {
		content += "---\napiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + n + "}\nspec: {profile: sim}\n"
	}
	return os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(content), 0o644)
}

var servingLine = regexp.MustCompile(` on (http://[^ ]+) \(`)

// startFleetd starts binary on a fresh state directory and a simulated
// herdr, and returns once every member is Ready with its worker token.
func startFleetd(ctx context.Context, binary string, extra []string) (*fleetd, error) {
	root, err := os.MkdirTemp("", "fleetd-hostile-")
	if err != nil {
		return nil, err
	}
	f := &fleetd{root: root, manifests: filepath.Join(root, "manifests"), exited: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			f.stop()
		}
	}()
	if err := writeManifests(f.manifests); err != nil {
		return nil, err
	}
	if f.sim, err = herdrsim.Start(&herdrsim.Options{SocketPath: filepath.Join(root, "herdr.sock"), ReadyDelay: 100 * time.Millisecond}); err != nil {
		return nil, err
	}
	state := filepath.Join(root, "state")
	args := append([]string{"serve", "--herdr-socket", f.sim.SocketPath(), "--manifests", f.manifests, "--state-dir", state,
		"--listen", "127.0.0.1:0", "--log-level", "error"}, extra...)
	f.cmd = exec.Command(binary, args...)
	f.cmd.Stderr = io.Discard // its error log: refused manifests, cut connections
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := f.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { f.cmd.Wait(); close(f.exited) }()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
			f.url = m[1]
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	if f.url == "" {
		return nil, errors.New("fleetd exited before it listened")
	}
	tok, err := os.ReadFile(statedir.At(state).PrimaryToken())
	if err != nil {
		return nil, err
	}
	f.primary = strings.TrimSpace(string(tok))
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		members, err := f.members(wctx)
		ready := 0
		for _, m := range members {
			if m.Status.Phase == v1alpha1.PhaseReady && m.Status.PaneID != "" {
				ready++
			}
		}
		if err == nil && ready == len(memberNames) {
			for _, m := range members {
				env, _ := f.sim.PaneEnv(m.Status.PaneID)
				f.workers = append(f.workers, env["FLEETD_TOKEN"])
				f.names = append(f.names, m.Name)
			}
			ok = true
			return f, nil
		}
		select {
		case <-wctx.Done():
			return nil, fmt.Errorf("the members never became Ready: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *fleetd) members(ctx context.Context) ([]v1alpha1.Member, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/members", nil)
	req.Header.Set("Authorization", "Bearer "+f.primary)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct{ Items []v1alpha1.Member }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// stop ends fleetd (SIGTERM, then SIGKILL), the simulation and the
// temporary directory.
func (f *fleetd) stop() {
	if f.cmd != nil && f.cmd.Process != nil {
		f.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-f.exited:
		case <-time.After(10 * time.Second):
			f.cmd.Process.Kill()
			<-f.exited
		}
	}
	if f.sim != nil {
		f.sim.Close()
	}
	os.RemoveAll(f.root)
}

// rssKiB reads a process's resident set.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, errors.New("no VmRSS")
}

// addr is the listener's host:port.
func (f *fleetd) addr() string { return strings.TrimPrefix(f.url, "http://") }

// mcpSession opens an MCP session with token.
func (f *fleetd) mcpSession(ctx context.Context, token string) (*sdk.ClientSession, error) {
	bt, err := mcpbridge.NewBearerTransport(f.url, token, nil)
	if err != nil {
		return nil, err
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "hostile", Version: "1"}, nil)
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: f.url + "/mcp", DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bt}, MaxRetries: -1}, nil)
}

// smallReceiveBuffer dials with a 2 KiB receive buffer: a reader that
// stops reading stalls the writer at once.
var smallReceiveBuffer = net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) }); err != nil {
		return err
	}
	return serr
}}
