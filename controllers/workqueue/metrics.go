package workqueue

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the fleetd_workqueue_* series, labelled by queue name as in
// controller-runtime. One Metrics serves any number of queues.
type Metrics struct {
	depth         *prometheus.GaugeVec
	adds          *prometheus.CounterVec
	retries       *prometheus.CounterVec
	queueDuration *prometheus.HistogramVec
	workDuration  *prometheus.HistogramVec
}

// NewMetrics creates the work-queue series and registers them on reg (nil
// reg: the series exist but are not exported).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12) // 10ns .. 1000s
	m := &Metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetd_workqueue_depth", Help: "Current number of keys waiting in the work queue.",
		}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetd_workqueue_adds_total", Help: "Total number of adds handled by the work queue.",
		}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetd_workqueue_retries_total", Help: "Total number of rate-limited retries handled by the work queue.",
		}, []string{"name"}),
		queueDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fleetd_workqueue_queue_duration_seconds", Help: "How long a key waits in the work queue before a worker takes it.",
			Buckets: buckets,
		}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fleetd_workqueue_work_duration_seconds", Help: "How long processing a key from the work queue takes.",
			Buckets: buckets,
		}, []string{"name"}),
	}
	if reg != nil {
		reg.MustRegister(m.depth, m.adds, m.retries, m.queueDuration, m.workDuration)
	}
	return m
}

// queueMetrics are one queue's children of Metrics.
type queueMetrics struct {
	depth         prometheus.Gauge
	adds          prometheus.Counter
	retries       prometheus.Counter
	queueDuration prometheus.Observer
	workDuration  prometheus.Observer
}

func (m *Metrics) forQueue(name string) queueMetrics {
	return queueMetrics{
		depth:         m.depth.WithLabelValues(name),
		adds:          m.adds.WithLabelValues(name),
		retries:       m.retries.WithLabelValues(name),
		queueDuration: m.queueDuration.WithLabelValues(name),
		workDuration:  m.workDuration.WithLabelValues(name),
	}
}
