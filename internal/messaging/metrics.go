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

func newMetrics() *metrics {
	return &metrics{
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
}

// register adds the series to reg (nil: nowhere). On error nothing stays
// registered.
func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	if err := reg.Register(m.wait); err != nil {
		return registerErr(err)
	}
	if err := reg.Register(m.depth); err != nil {
		reg.Unregister(m.wait)
		return registerErr(err)
	}
	return nil
}

func registerErr(err error) error {
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		return errors.New("messaging metrics already registered on this registry")
	}
	return err
}
