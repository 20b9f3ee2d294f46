package messaging

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics_WaitOutcomesAndQueueDepth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		c := newCore(t, t.TempDir(), &fakeHerdr{}, &Options{Registerer: reg})
		c.ObserveStatus("w", StatusIdle, 1)
		send := call(func() (SendResult, error) {
			return c.Send(bg, SendRequest{From: "primary", To: "w", Content: "x", Wait: true})
		})
		pending(t, send)
		time.Sleep(2 * time.Second)
		c.Reply(bg, "w", "done", true)
		got(t, send)
		timeout := call(func() (SendResult, error) {
			return c.Send(bg, SendRequest{From: "primary", To: "busy", Content: "y", Wait: true, Timeout: time.Minute})
		})
		time.Sleep(time.Minute)
		got(t, timeout)
		c.Send(bg, SendRequest{From: "primary", To: "busy", Content: "z"})

		if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
			t.Fatalf("lint: %v %+v", err, problems)
		}
		if v := testutil.ToFloat64(c.metrics.depth); v != 2 {
			t.Errorf("fleetd_injector_queue_depth = %v, want 2", v)
		}
		want := `
# HELP fleetd_injector_queue_depth Messages queued for delivery into agent panes and not yet delivered.
# TYPE fleetd_injector_queue_depth gauge
fleetd_injector_queue_depth 2
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fleetd_injector_queue_depth"); err != nil {
			t.Error(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]uint64{}
		sums := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "fleetd_rendezvous_wait_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
				sums[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleSum()
			}
		}
		if diff := cmp.Diff(map[string]uint64{"reply": 1, "timeout": 1}, counts); diff != "" {
			t.Errorf("wait samples by outcome (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]float64{"reply": 2, "timeout": 60}, sums); diff != "" {
			t.Errorf("wait seconds by outcome (-want +got):\n%s", diff)
		}
	})
}
