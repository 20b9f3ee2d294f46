package controllers

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/controllers/workqueue"
)

// controllerName labels the member reconciler's series.
const controllerName = "member"

// Reconcile results, the values of fleetd_reconcile_total's result label,
// controller-runtime's set (DESIGN §3.4). requeue counts the reconciles
// that hand the member's next step to its next reconcile at once (a
// created tab's agent.start: Result.Requeue); an error is counted as error
// and retried with backoff.
const (
	resultSuccess      = "success"
	resultError        = "error"
	resultRequeue      = "requeue"
	resultRequeueAfter = "requeue_after"
)

var allPhases = []string{
	v1alpha1.PhasePending, v1alpha1.PhaseStarting, v1alpha1.PhaseReady, v1alpha1.PhaseDegraded,
	v1alpha1.PhaseFailed, v1alpha1.PhasePaused, v1alpha1.PhaseTerminating,
}

// Metrics are the controllers' Prometheus series (DESIGN §3.4), named after
// controller-runtime's under the fleetd_ prefix. Create one with NewMetrics,
// pass its HerdrObserver to the herdr client and the Metrics to New. No label
// ever carries a member's message, token or credential.
type Metrics struct {
	reconcileTotal  *prometheus.CounterVec
	reconcileErrors *prometheus.CounterVec
	reconcileTime   *prometheus.HistogramVec
	members         *prometheus.GaugeVec
	awaitingInput   prometheus.Gauge
	waiting         *prometheus.GaugeVec
	restarts        prometheus.Counter
	herdrRequests   *prometheus.CounterVec
	herdrDuration   *prometheus.HistogramVec
	herdrUp         prometheus.Gauge
	manifestErrors  prometheus.Gauge
	queue           *workqueue.Metrics
	cache           *herdrcache.Metrics
	rollouts        *rolloutMetrics
}

// NewMetrics creates the series and registers them on reg (nil: created but
// not exported). The Go and process collectors are the registry owner's to
// add.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetd_reconcile_total", Help: "Total number of reconciliations per controller and result.",
		}, []string{"controller", "result"}),
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetd_reconcile_errors_total", Help: "Total number of reconciliation errors per controller.",
		}, []string{"controller"}),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fleetd_reconcile_time_seconds", Help: "Length of time per reconciliation per controller.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
				0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60},
		}, []string{"controller"}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetd_members", Help: "Number of members per phase.",
		}, []string{"phase"}),
		awaitingInput: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetd_members_awaiting_input", Help: "Number of members whose agent waits at a dialog for a person to answer it in herdr.",
		}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetd_members_waiting",
			Help: "Number of members waiting for their agent to be idle (no turn open, nothing queued, no question held) before their tab closes (reason Terminating) or their agent is replaced by a new definition (reason Updating).",
		}, []string{"reason"}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetd_member_restarts_total", Help: "Total number of member panes recreated after their pane closed or agent exited.",
		}),
		herdrRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetd_herdr_requests_total", Help: "Total number of herdr API requests per method and outcome code.",
		}, []string{"method", "code"}),
		herdrDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fleetd_herdr_request_duration_seconds", Help: "Duration of herdr API requests per method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"method"}),
		herdrUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetd_herdr_up", Help: "1 while herdr answers and fleetd's view of it is in sync, 0 otherwise.",
		}),
		manifestErrors: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetd_manifest_errors", Help: "Number of current problems in the manifests directory.",
		}),
		queue:    workqueue.NewMetrics(reg),
		cache:    herdrcache.NewMetrics(reg),
		rollouts: newRolloutMetrics(),
	}
	for _, r := range []string{resultSuccess, resultError, resultRequeue, resultRequeueAfter} {
		m.reconcileTotal.WithLabelValues(controllerName, r)
	}
	m.reconcileErrors.WithLabelValues(controllerName)
	for _, p := range allPhases {
		m.members.WithLabelValues(p)
	}
	for _, w := range []string{waitTerminating, waitUpdating} {
		m.waiting.WithLabelValues(w)
	}
	if reg != nil {
		reg.MustRegister(m.reconcileTotal, m.reconcileErrors, m.reconcileTime, m.members, m.awaitingInput, m.waiting, m.restarts,
			m.herdrRequests, m.herdrDuration, m.herdrUp, m.manifestErrors, m.rollouts, m.rollouts.replacements)
	}
	return m
}

// HerdrObserver returns the function to set as herdr.Options.Observer so
// that every herdr call is counted and timed.
func (m *Metrics) HerdrObserver() func(method, code string, d time.Duration) {
	return func(method, code string, d time.Duration) {
		m.herdrRequests.WithLabelValues(method, code).Inc()
		m.herdrDuration.WithLabelValues(method).Observe(d.Seconds())
	}
}

// Results of a rollout's replacement, the values of
// fleetd_rollout_replacements_total's result label.
const (
	replacementReady  = "ready"
	replacementFailed = "failed"
)

// rolloutMetrics are the profiles' rollouts as series: gauges read from
// the Manager's profiles at each scrape (a collector, so that no status
// write has to keep them), and a counter of replacements.
type rolloutMetrics struct {
	members, updated, replacing, paused, failed *prometheus.Desc
	replacements                                *prometheus.CounterVec
	profiles                                    atomic.Pointer[func() []v1alpha1.Profile]
}

func newRolloutMetrics() *rolloutMetrics {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"profile"}, nil)
	}
	return &rolloutMetrics{
		members:   desc("fleetd_rollout_members", "Number of members that use the profile and are not paused."),
		updated:   desc("fleetd_rollout_members_updated", "Number of the profile's members whose agent runs the profile (and its tenant) as it is now."),
		replacing: desc("fleetd_rollout_members_replacing", "Number of the profile's members its rollout replaces now (a turn taken: waiting for the agent to be idle, or the new agent not Ready yet)."),
		paused:    desc("fleetd_rollout_paused", "1 while the profile's rollout is paused by spec.rollout.paused, 0 otherwise."),
		failed:    desc("fleetd_rollout_failed", "1 while the profile's rollout is stopped by a replacement that did not become Ready, 0 otherwise."),
		replacements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetd_rollout_replacements_total",
			Help: "Total number of member agents replaced by a profile's rollout, per profile and result (ready: the new agent became Ready; failed: it did not, and the rollout stopped).",
		}, []string{"profile", "result"}),
	}
}

// follow makes the gauges read m's profiles.
func (r *rolloutMetrics) follow(m *Manager) {
	f := m.Profiles
	r.profiles.Store(&f)
}

// Describe implements prometheus.Collector.
func (r *rolloutMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{r.members, r.updated, r.replacing, r.paused, r.failed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (r *rolloutMetrics) Collect(ch chan<- prometheus.Metric) {
	f := r.profiles.Load()
	if f == nil {
		return
	}
	for _, p := range (*f)() {
		st := p.Status
		var paused, failed float64
		for _, c := range st.Conditions {
			if c.Type == v1alpha1.ConditionProgressing && c.Status == v1alpha1.ConditionFalse {
				paused = b2f(c.Reason == v1alpha1.ReasonRolloutPaused)
				failed = b2f(c.Reason == v1alpha1.ReasonRolloutFailed)
			}
		}
		for _, g := range []struct {
			d *prometheus.Desc
			v float64
		}{{r.members, float64(st.Members)}, {r.updated, float64(st.UpdatedMembers)}, {r.replacing, float64(len(st.Updating))},
			{r.paused, paused}, {r.failed, failed}} {
			ch <- prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, g.v, p.Name)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
