package messaging

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/journal"
)

// slowSyncFile delays every fsync by d, as a loaded disk does.
type slowSyncFile struct {
	journal.File
	d time.Duration
}

func (f slowSyncFile) Sync() error {
	time.Sleep(f.d)
	return f.File.Sync()
}

// BenchmarkSendersWithSlowFsync runs N concurrent senders (detached
// bridge_send into an open turn, one record batch and one fsync each)
// against a journal whose fsync takes 1 ms more than the disk's, while one
// reader polls and reads status every 2 ms. ns/op is per send (the senders
// still take turns at the disk: about one fsync each); read-p50-µs and
// read-max-µs are how long the reader's PollPage+Status+Pending took: the
// figure that must not contain another call's fsync.
func BenchmarkSendersWithSlowFsync(b *testing.B) {
	for _, senders := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("senders=%d", senders), func(b *testing.B) {
			o := testOptions(&Options{wrapJournal: func(f journal.File) journal.File {
				return slowSyncFile{File: f, d: time.Millisecond}
			}})
			c, err := New(b.TempDir(), &fakeHerdr{}, o)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Reply(bg, "w0", "something to poll", false); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			readerDone := make(chan struct{})
			var reads []time.Duration
			go func() {
				defer close(readerDone)
				for {
					select {
					case <-stop:
						return
					default:
					}
					t0 := time.Now()
					if _, err := c.PollPage(bg, "primary", PollRequest{}); err != nil {
						b.Error(err)
						return
					}
					c.Status("w0")
					c.Pending("primary")
					reads = append(reads, time.Since(t0))
					time.Sleep(2 * time.Millisecond)
				}
			}()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for i := range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// One turn per sender, continued: the state stays
					// small, so that reads cost what they cost.
					req := SendRequest{From: "primary", To: fmt.Sprintf("w%d", i), Content: "hello"}
					for next.Add(1) <= int64(b.N) {
						res, err := c.Send(bg, req)
						if err != nil {
							b.Error(err)
							return
						}
						req.TurnID = res.TurnID
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(stop)
			<-readerDone
			if len(reads) > 0 {
				slices.Sort(reads)
				b.ReportMetric(float64(reads[len(reads)/2].Microseconds()), "read-p50-µs")
				b.ReportMetric(float64(reads[len(reads)-1].Microseconds()), "read-max-µs")
			}
		})
	}
}
