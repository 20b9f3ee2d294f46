package daemon

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// recordedNode records the registration publishNode would write, each
// time it changes, with when.
type recordedNode struct {
	mu     sync.Mutex
	info   etcdstore.NodeInfo
	writes []nodeWrite
}

type nodeWrite struct {
	at        time.Time
	members   int
	reachable bool
}

func (r *recordedNode) Update(_ context.Context, change func(*etcdstore.NodeInfo)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.info
	change(&next)
	if len(r.writes) == 0 || next.Members != r.info.Members || next.Herdr.Reachable != r.info.Herdr.Reachable {
		r.writes = append(r.writes, nodeWrite{time.Now(), next.Members, next.Herdr.Reachable})
	}
	r.info = next
	return nil
}

// broadcast is a change signal: every Signal closes the channel the last
// Changed returned.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) Signal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// A member count that changes every 10 ms for 1.5 s (a fleet converging)
// is written at most once per nodeCoalesce, and its last value is written;
// herdr going away while a count waits its turn is written at once.
func TestPublishNode_CoalescesRewrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		rec := &recordedNode{}
		var count atomic.Int64
		var reachable atomic.Bool
		reachable.Store(true)
		var changes broadcast
		done := make(chan struct{})
		go func() {
			defer close(done)
			publishNode(ctx, rec, prometheus.NewRegistry(), reachable.Load, func() int { return int(count.Load()) },
				changes.Changed, clock.Real{}, slog.New(slog.DiscardHandler))
		}()
		synctest.Wait()
		for range 150 {
			count.Add(1)
			changes.Signal()
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(3 * time.Second)

		rec.mu.Lock()
		for i := 1; i < len(rec.writes); i++ {
			if gap := rec.writes[i].at.Sub(rec.writes[i-1].at); gap < nodeCoalesce {
				t.Errorf("write %d (%d members) %s after the one before; want at least %s", i, rec.writes[i].members, gap, nodeCoalesce)
			}
		}
		if n := len(rec.writes); n > 4 || rec.writes[n-1].members != 150 {
			t.Errorf("%d writes, the last with %d members; want at most 4, the last with 150", n, rec.writes[n-1].members)
		}
		rec.mu.Unlock()

		count.Add(1) // written now: the next write waits a second
		changes.Signal()
		synctest.Wait()
		count.Add(1) // waits
		changes.Signal()
		synctest.Wait()
		reachable.Store(false)
		lost := time.Now()
		changes.Signal()
		synctest.Wait()
		rec.mu.Lock()
		last := rec.writes[len(rec.writes)-1]
		rec.mu.Unlock()
		if last.reachable || !last.at.Equal(lost) || last.members != 152 {
			t.Errorf("last write %+v; want herdr unreachable and 152 members written at once, at %v", last, lost)
		}
		cancel()
		<-done
	})
}
