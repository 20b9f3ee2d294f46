package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/fencewatch"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/store"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// fixedFence is a fence whose deadlines a test sets.
type fixedFence struct {
	lose, takeover time.Duration
	changed        notify.Signal
}

func (f *fixedFence) Deadlines() (lose, takeover time.Duration) { return f.lose, f.takeover }
func (f *fixedFence) Changed() <-chan struct{}                  { return f.changed.Changed() }

// A watchdog process that exits is logged and started again after the
// backoff, on herdr's socket, and armed at once with the node's plan; a
// change of the fence arms it again; the end of Run ends its input, and it
// exits. The watchdog here is a script that exits at its first start and
// then echoes every plan it reads to its standard error.
func TestFenceWatch_AWatchdogThatExitsIsStartedAgainAndArmed(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "watchdog")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
echo "start $*" >&2
if [ ! -e "`+dir+`/started" ]; then : > "`+dir+`/started"; exit 3; fi
while IFS= read -r line; do echo "plan $line" >&2; done
echo eof >&2
`), 0o755); err != nil {
		t.Fatal(err)
	}
	stderr := &syncbuf.Lines{C: make(chan string, 64)}
	var logs syncbuf.Buffer
	clk := clock.NewFake(time.Unix(1e9, 0))
	fence := &fixedFence{lose: 4 * time.Second, takeover: 12 * time.Second}
	snap := store.NewSnapshot()
	for _, m := range []*v1alpha1.Member{
		{ObjectMeta: v1alpha1.ObjectMeta{Name: "pinned"}, Spec: v1alpha1.MemberSpec{NodeName: "a"}},
		{ObjectMeta: v1alpha1.ObjectMeta{Name: "elsewhere"}, Spec: v1alpha1.MemberSpec{NodeName: "b"}},
		{ObjectMeta: v1alpha1.ObjectMeta{Name: "placed"}},
	} {
		snap.Put(m, "test")
	}
	var renewed, members notify.Signal
	w := &fenceWatch{argv: []string{script}, stderr: stderr, fence: fence, renewed: renewed.Changed,
		members: func() *store.Snapshot { return snap }, changed: members.Changed, node: "a",
		policy: controllers.FenceClose, log: slog.New(slog.NewTextHandler(&logs, nil)), clock: clk}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx, "/run/herdr.sock") }()
	next := func(what string) string {
		t.Helper()
		select {
		case l := <-stderr.C:
			return l
		case <-ctx.Done():
			t.Fatalf("no %s from the watchdog; fleetd logged:\n%s", what, logs.String())
			return ""
		}
	}
	plan := func() fencewatch.Plan {
		t.Helper()
		l := next("plan")
		var p fencewatch.Plan
		if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "plan ")), &p); err != nil || !strings.HasPrefix(l, "plan ") {
			t.Fatalf("the watchdog read %q, want a plan", l)
		}
		return p
	}

	const started = "start --herdr-socket /run/herdr.sock"
	if l := next("start"); l != started {
		t.Fatalf("the watchdog started as %q, want %q", l, started)
	}
	// It exited: Run says so and waits for its backoff on the clock.
	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatalf("no backoff after the watchdog exited: %v", err)
	}
	if !strings.Contains(logs.String(), "the fence watchdog exited; starting it again") {
		t.Errorf("the exit was not logged:\n%s", logs.String())
	}
	clk.Step(time.Minute)
	if l := next("second start"); l != started {
		t.Fatalf("the watchdog started again as %q, want %q", l, started)
	}
	p := plan()
	if diff := cmp.Diff([]string{"pinned"}, p.Keep); diff != "" {
		t.Errorf("the plan spares (-want +got):\n%s", diff)
	}
	if p.Policy != fencewatch.Close || p.Prefix != controllers.TabLabelPrefix || p.FireAt <= 0 {
		t.Errorf("plan %+v, want policy close on fleetd's tabs at a time", p)
	}
	// At the fence's deadline plus a quarter of the margin after it.
	if at, now := time.Duration(p.FireAt), time.Duration(fencewatch.BootTime()); at <= now || at > now+6*time.Second {
		t.Errorf("the plan fires %v from now, want at most 4s + (12s-4s)/4 = 6s", at-now)
	}

	fence.lose = 2 * time.Second
	fence.changed.Notify()
	if p2 := plan(); p2.FireAt >= p.FireAt {
		t.Errorf("after the fence's deadline came closer the plan fires at %d, not before %d", p2.FireAt, p.FireAt)
	}

	stop()
	if l := next("end of input"); l != "eof" {
		t.Errorf("after Run ended the watchdog wrote %q, want the end of its input", l)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
