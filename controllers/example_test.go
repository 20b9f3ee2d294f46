package controllers_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store/dirstore"
)

// A Manager drives herdr (here the in-process fake) until the members
// declared in a store (here a manifests directory) run, each in its own
// tab.
func Example() {
	fake, err := validated.Start(nil)
	if err != nil {
		panic(err)
	}
	defer fake.Close()
	root, _ := os.MkdirTemp("", "fleetd-example")
	defer os.RemoveAll(root)
	manifests := filepath.Join(root, "manifests")
	os.Mkdir(manifests, 0o755)
	os.WriteFile(filepath.Join(manifests, "team.yaml"), []byte(`apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: codex-fast}
spec: {harness: codex}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer}
spec: {profile: codex-fast}
`), 0o644)

	state := statedir.At(filepath.Join(root, "state"))
	state.Create()
	log := slog.New(slog.DiscardHandler)
	desired, err := dirstore.New(manifests, &dirstore.Options{StateDir: state.Root(), Logger: log})
	if err != nil {
		panic(err)
	}
	// Where fleetd keeps the panes it runs, so that a restart adopts them.
	db, err := statedb.Open(state.StateDB(), nil)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	mgr, err := controllers.New(&controllers.Options{
		Store:       desired, // run by mgr.Run
		State:       db,
		HerdrSocket: fake.SocketPath(),
		Registerer:  prometheus.NewRegistry(),
		Logger:      log,
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Run(ctx) }()

	wait, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	err = mgr.WaitFor(wait, func(ms []v1alpha1.Member) bool {
		return len(ms) == 1 && ms[0].Status.Phase == v1alpha1.PhaseReady
	})
	if err != nil {
		panic(err)
	}
	m, _ := mgr.Member("reviewer")
	p, _ := fake.Pane(m.Status.PaneID)
	fmt.Println(m.Name, m.Status.Phase, "agent", p.AgentName, "kind", p.AgentKind)
	cancel()
	<-done
	// Output: reviewer Ready agent reviewer kind codex
}
