package main

import (
	"context"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
)

// liveFleetd is `fleetd serve --herdr=sim` run in process on a manifests
// directory, for the tests that drive the CLI against a running fleetd.
type liveFleetd struct {
	manifests string
	stateDir  string
	info      daemon.Info
	client    []string        // --server and --state-dir flags for the CLI
	ctx       context.Context // ends when fleetd is stopped, a minute after its start at the latest
	stop      func()          // shuts fleetd down and checks it stopped cleanly; also at the test's end
}

// startFleetd serves the files (name → contents) as the manifests
// directory, with the fake herdr checking every request against its
// schema, until the test ends or stop is called. Each tune function may
// change the configuration first.
func startFleetd(t *testing.T, files map[string]string, tune ...func(*daemon.Config)) *liveFleetd {
	t.Helper()
	f := &liveFleetd{manifests: writeTree(t, files), stateDir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	f.ctx = ctx
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	cfg := daemon.Config{ManifestsDir: f.manifests, StateDir: f.stateDir, Listen: "127.0.0.1:0", Sim: true, SimValidator: validated.Schema(),
		Ready: func(i daemon.Info) { ready <- i }}
	for _, fn := range tune {
		fn(&cfg)
	}
	go func() { done <- daemon.Run(ctx, cfg) }()
	select {
	case f.info = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("fleetd serve ended before listening: %v", err)
	}
	stopped := false
	f.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fleetd serve: %v", err)
		}
	}
	t.Cleanup(f.stop)
	f.client = []string{"--server", f.info.URL, "--state-dir", f.stateDir}
	return f
}

// waitReady waits until every named member is Ready.
func (f *liveFleetd) waitReady(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
			for _, m := range ms {
				if m.Name == name {
					return m.Status.Phase == v1alpha1.PhaseReady
				}
			}
			return false
		}); err != nil {
			t.Fatalf("%s never became Ready: %v", name, err)
		}
	}
}
