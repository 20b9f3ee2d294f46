package messaging

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the core's Prometheus series. Labels never carry content, ids
// or names.
type metrics struct {
	wait  *prometheus.HistogramVec
	depth prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fleetd_rendezvous_wait_seconds",
			Help:    "How long blocking bridge_send, bridge_ask and turn waits were held, by how they ended.",
			Buckets: []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800},
		}, []string{"outcome"}),
		depth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetd_injector_queue_depth",
			Help: "Messages queued for delivery into agent panes and not yet delivered.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.wait, m.depth} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("messaging metrics already registered on this registry")
			}
			return nil, err
		}
	}
	return m, nil
}
