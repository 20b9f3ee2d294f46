package controllers

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// logBuffer is a log destination safe for the Manager's goroutines.
type logBuffer struct{ syncbuf.Buffer }

// count returns how many logged lines contain s.
func (b *logBuffer) count(s string) int { return strings.Count(b.String(), s) }

// TestManager_HerdrUnreachableAtStartIsSaid: a fleetd started without a
// reachable herdr says so, at start and then every minute, and every
// member shows Ready=Unknown (HerdrUnavailable) rather than a Pending
// nobody explains; once herdr answers the members start.
func TestManager_HerdrUnreachableAtStartIsSaid(t *testing.T) {
	const warning = `level=WARN msg="herdr is not reachable;`
	eachProtocol(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")}, func(t *testing.T, e *env) {
		logs := &logBuffer{}
		e.tweak = func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
		e.startFake(nil)
		if err := e.fake.Stop(); err != nil {
			t.Fatal(err)
		}
		e.start()
		ms := e.waitFor("alpha shows herdr unavailable", func(ms map[string]v1alpha1.Member) bool {
			c := condition(ms["alpha"], v1alpha1.ConditionReady)
			return c.Status == v1alpha1.ConditionUnknown && c.Reason == v1alpha1.ReasonHerdrUnavailable
		})
		if ms["alpha"].Status.Phase == v1alpha1.PhaseReady {
			t.Errorf("alpha is %s while herdr never answered", ms["alpha"].Status.Phase)
		}
		synctest.Wait()
		if n := logs.count(warning); n != 1 {
			t.Fatalf("%d warnings by %s after the start, want 1:\n%s", n, herdrWarnAfter, logs.String())
		}
		if n := logs.count(`err="herdr ping: unavailable`); n != 1 {
			t.Errorf("the warning does not say what the ping said:\n%s", logs.String())
		}
		time.Sleep(herdrWarnEvery)
		synctest.Wait()
		if n := logs.count(warning); n != 2 {
			t.Errorf("%d warnings a minute later, want 2:\n%s", n, logs.String())
		}
		if err := e.fake.Restart(); err != nil {
			t.Fatal(err)
		}
		e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		time.Sleep(2 * herdrWarnEvery)
		synctest.Wait()
		if n := logs.count(warning); n != 2 {
			t.Errorf("%d warnings after herdr answered, want still 2:\n%s", n, logs.String())
		}
	})
}

// TestManager_DebugLogsEachReconcile: at debug level every reconcile says
// what it decided.
func TestManager_DebugLogsEachReconcile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		logs := &logBuffer{}
		e.tweak = func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		e.start()
		e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		synctest.Wait()
		if n := logs.count(`level=DEBUG msg=reconciled member=alpha phase=Ready ready=True`); n == 0 {
			t.Errorf("no debug line for the reconcile that found alpha Ready:\n%s", logs.String())
		}
	})
}
