package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// recordedNode records the registration publishNode would write, each
// time it changes, with when.
type recordedNode struct {
	mu     sync.Mutex
	info   NodeInfo
	writes []nodeWrite
}

type nodeWrite struct {
	at        time.Time
	members   int
	reachable bool
	version   string
}

func (r *recordedNode) Update(_ context.Context, change func(*NodeInfo)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.info
	change(&next)
	if len(r.writes) == 0 || next.Members != r.info.Members || next.Herdr.Reachable != r.info.Herdr.Reachable || next.Herdr.Version != r.info.Herdr.Version {
		r.writes = append(r.writes, nodeWrite{time.Now(), next.Members, next.Herdr.Reachable, next.Herdr.Version})
	}
	r.info = next
	return nil
}

// fakeLocal is a node's herdr and member count.
type fakeLocal struct {
	count     atomic.Int64
	reachable atomic.Bool
	changes   notify.Signal
}

func (l *fakeLocal) Herdr() v1alpha1.NodeHerdr {
	return v1alpha1.NodeHerdr{Reachable: l.reachable.Load(), Version: "0.9.3", Protocol: 22}
}
func (l *fakeLocal) Members() int             { return int(l.count.Load()) }
func (l *fakeLocal) Changed() <-chan struct{} { return l.changes.Changed() }

// A member count that changes every 10 ms for 1.5 s (a fleet converging)
// is written at most once per nodeCoalesce, and its last value is written;
// herdr going away while a count waits its turn is written at once; herdr's
// version is what the node's herdr answered.
func TestPublishNode_CoalescesRewrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		rec := &recordedNode{}
		local := &fakeLocal{}
		local.reachable.Store(true)
		done := make(chan struct{})
		go func() {
			defer close(done)
			publishNode(ctx, rec, local, clock.Real{}, quiet)
		}()
		synctest.Wait()
		for range 150 {
			local.count.Add(1)
			local.changes.Notify()
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(3 * time.Second)

		rec.mu.Lock()
		for i := 1; i < len(rec.writes); i++ {
			if gap := rec.writes[i].at.Sub(rec.writes[i-1].at); gap < nodeCoalesce {
				t.Errorf("write %d (%d members) %s after the one before; want at least %s", i, rec.writes[i].members, gap, nodeCoalesce)
			}
		}
		if n := len(rec.writes); n > 4 || rec.writes[n-1].members != 150 || rec.writes[n-1].version != "0.9.3" {
			t.Errorf("%d writes, the last %+v; want at most 4, the last with 150 members and herdr 0.9.3", n, rec.writes[n-1])
		}
		rec.mu.Unlock()

		local.count.Add(1) // written now: the next write waits a second
		local.changes.Notify()
		synctest.Wait()
		local.count.Add(1) // waits
		local.changes.Notify()
		synctest.Wait()
		local.reachable.Store(false)
		lost := time.Now()
		local.changes.Notify()
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
