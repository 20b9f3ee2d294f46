package herdrcache

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the cache's Prometheus series: fleetd_herdr_info, 1 labelled
// with the version and protocol of the herdr fleetd talks to, as its last
// ping answered (the series of an earlier herdr is dropped when another
// answers). One Metrics serves one Cache.
type Metrics struct {
	info *prometheus.GaugeVec

	mu      sync.Mutex
	current []string // the label values set, nil before the first ping
}

// NewMetrics creates the cache's series and registers them on reg (nil reg:
// the series exist but are not exported).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetd_herdr_info", Help: "1, labelled with the version and socket protocol of the herdr fleetd talks to (from its last ping).",
		}, []string{"version", "protocol"}),
	}
	if reg != nil {
		reg.MustRegister(m.info)
	}
	return m
}

// setHerdr records what herdr's ping answered.
func (m *Metrics) setHerdr(version string, protocol int) {
	labels := []string{version, strconv.Itoa(protocol)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current != nil && (m.current[0] != labels[0] || m.current[1] != labels[1]) {
		m.info.DeleteLabelValues(m.current...)
	}
	m.current = labels
	m.info.WithLabelValues(labels...).Set(1)
}
