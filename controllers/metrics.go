package controllers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/controllers/workqueue"
)

// controllerName labels the member reconciler's series.
const controllerName = "member"

// Reconcile results, the values of fleetd_reconcile_total's result label,
// controller-runtime's set (DESIGN §3.4). requeue stays 0: the member
// reconciler never asks for a bare requeue (Result has RequeueAfter only);
// an error is counted as error and retried with backoff.
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
		queue: workqueue.NewMetrics(reg),
		cache: herdrcache.NewMetrics(reg),
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
			m.herdrRequests, m.herdrDuration, m.herdrUp, m.manifestErrors)
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
