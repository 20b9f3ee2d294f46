package workqueue

import (
	"context"
	"strconv"
	"sync"
	"testing"
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
