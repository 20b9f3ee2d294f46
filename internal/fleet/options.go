package fleet

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// Defaults of [Options].
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultRetryInterval  = time.Second
)

// Options configure the fleet's parts ([NewNodes], [NewStatuses],
// [NewToken], [Register], [PublishStatuses]). nil means defaults.
type Options struct {
	// Prefix is the fleet's key prefix; default etcdstore.DefaultPrefix.
	Prefix string
	// RequestTimeout bounds every request to etcd; default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RetryInterval is the base of the backoff after etcd failed a list or
	// a write; default DefaultRetryInterval.
	RetryInterval time.Duration
	// Clock dates a node's loss and drives the retries; default the wall
	// clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	r.Prefix = cmp.Or(r.Prefix, etcdstore.DefaultPrefix)
	r.RequestTimeout = cmp.Or(r.RequestTimeout, DefaultRequestTimeout)
	r.RetryInterval = cmp.Or(r.RetryInterval, DefaultRetryInterval)
	r.Clock = cmp.Or[clock.Clock](r.Clock, clock.Real{})
	r.Logger = cmp.Or(r.Logger, slog.Default())
	return r
}
