package workqueue

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/heaptest"
)

// BenchmarkQueue_AddToIdleWorkers is the cost of handing one key at a time
// to a pool of idle workers, as a controller's 32 workers wait between
// events: from Add until a worker has taken and finished the key.
func BenchmarkQueue_AddToIdleWorkers(b *testing.B) {
	q := New(nil)
	defer q.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, ok := q.Get(ctx)
				if !ok {
					return
				}
				q.Done(k)
				done <- struct{}{}
			}
		}()
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "m" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		q.Add(keys[i%len(keys)])
		<-done
	}
	b.StopTimer()
	cancel()
	wg.Wait()
}

// BenchmarkQueue_DrainedBurstRetains reports what a queue keeps once a
// burst of 1000 keys (every member queued at start-up) was taken and done.
func BenchmarkQueue_DrainedBurstRetains(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "m" + strconv.Itoa(i)
	}
	ctx := context.Background()
	for b.Loop() {
		q := New(nil)
		before := heaptest.Live()
		for _, k := range keys {
			q.Add(k)
		}
		for range keys {
			k, _ := q.Get(ctx)
			q.Done(k)
		}
		after := heaptest.Live()
		b.ReportMetric(float64(int64(after)-int64(before)), "retained-B")
		q.ShutDown()
	}
}
