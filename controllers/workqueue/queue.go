package workqueue

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Defaults match client-go's DefaultControllerRateLimiter.
const (
	DefaultBaseDelay = 5 * time.Millisecond
	DefaultMaxDelay  = 1000 * time.Second
	DefaultQPS       = 10
	DefaultBurst     = 100
)

// Options configure a Queue. A nil *Options means all defaults.
type Options struct {
	// Name labels the queue's metrics; default "default".
	Name string
	// Clock is the time source; default the wall clock.
	Clock clock.Clock
	// BaseDelay and MaxDelay bound the per-item exponential backoff of
	// AddRateLimited; defaults DefaultBaseDelay and DefaultMaxDelay.
	BaseDelay, MaxDelay time.Duration
	// QPS and Burst size the overall token bucket for AddRateLimited;
	// defaults DefaultQPS and DefaultBurst. A negative QPS disables it.
	QPS   float64
	Burst int
	// Metrics receives the queue's series; nil means unexported metrics.
	Metrics *Metrics
}

// Queue is a deduplicating, rate-limited queue of keys. It is safe for
// concurrent use. Its delay goroutine runs until ShutDown.
type Queue struct {
	clock   clock.Clock
	limiter *rateLimiter
	metrics queueMetrics

	// epoch is when the queue was made: dirty keeps when a key was added
	// as the time since (8 bytes, where a time.Time is 24: a burst that
	// queues a thousand members at once grows dirty to 2048 slots, 48 KB
	// so, where they took 96 KB).
	epoch time.Time

	mu    sync.Mutex
	queue []string
	dirty map[string]time.Duration // waiting keys → when they were added, since epoch
	// dirtyPeak is the most keys dirty has held since it was last made:
	// a map never gives back the room a burst (every member queued at
	// once) grew it to, so Get makes it anew once a burst has drained.
	dirtyPeak    int
	processing   map[string]time.Time // keys held by a worker → when taken
	shuttingDown bool
	// changed is notified, under mu, of every change WaitInactive may
	// wait for.
	changed notify.Signal
	// work wakes one Get waiting for a key: a key queued sends to it, and
	// a Get that takes a key and leaves others passes it on. Waking every
	// idle worker for each key (changed) would have them all race for it,
	// and all but one go back to sleep.
	work chan struct{}

	waitingMu sync.Mutex
	waiting   delayHeap
	waitIndex map[string]*delayed
	kick      chan struct{}
	stop      chan struct{}
	stopped   chan struct{}
}

// keepDirtyRoom is how many keys' room an empty dirty map may keep.
const keepDirtyRoom = 64

// New returns a running Queue.
func New(opts *Options) *Queue {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "default"
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = DefaultBaseDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	q := &Queue{
		epoch:      o.Clock.Now(),
		clock:      o.Clock,
		limiter:    newRateLimiter(o.BaseDelay, o.MaxDelay, o.QPS, o.Burst),
		metrics:    o.Metrics.forQueue(o.Name),
		dirty:      map[string]time.Duration{},
		processing: map[string]time.Time{},
		waitIndex:  map[string]*delayed{},
		kick:       make(chan struct{}, 1),
		work:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	go q.delayLoop()
	return q
}

// Add queues key unless it is already waiting. A key being processed is
// queued again when its worker calls Done.
func (q *Queue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	q.metrics.adds.Inc()
	if _, ok := q.dirty[key]; ok {
		return
	}
	q.dirty[key] = q.clock.Now().Sub(q.epoch)
	q.dirtyPeak = max(q.dirtyPeak, len(q.dirty))
	if _, ok := q.processing[key]; ok {
		return
	}
	q.queue = append(q.queue, key)
	q.metrics.depth.Inc()
	q.handOff()
	q.wake()
}

// AddAfter queues key once d has passed on the queue's clock. Of several
// pending delays for one key the earliest wins.
func (q *Queue) AddAfter(key string, d time.Duration) {
	if d <= 0 {
		q.Add(key)
		return
	}
	q.mu.Lock()
	down := q.shuttingDown
	q.mu.Unlock()
	if down {
		return
	}
	at := q.clock.Now().Add(d)
	q.waitingMu.Lock()
	if w, ok := q.waitIndex[key]; ok {
		if at.Before(w.at) {
			w.at = at
			heap.Fix(&q.waiting, w.index)
		}
	} else {
		w := &delayed{key: key, at: at}
		heap.Push(&q.waiting, w)
		q.waitIndex[key] = w
	}
	q.waitingMu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// AddRateLimited queues key after its backoff: the per-item exponential
// delay or the overall token bucket's, whichever is longer.
func (q *Queue) AddRateLimited(key string) {
	q.metrics.retries.Inc()
	q.AddAfter(key, q.limiter.when(key, q.clock.Now()))
}

// Forget resets key's backoff; call it when key was processed successfully.
func (q *Queue) Forget(key string) { q.limiter.forget(key) }

// NumRequeues reports how many rate-limited retries key has had since its
// last Forget.
func (q *Queue) NumRequeues(key string) int { return q.limiter.numRequeues(key) }

// Get blocks until a key is available, the queue shuts down or ctx ends.
// ok is false in the latter two cases. The caller must call Done(key).
func (q *Queue) Get(ctx context.Context) (key string, ok bool) {
	for {
		q.mu.Lock()
		if q.shuttingDown {
			q.mu.Unlock()
			return "", false
		}
		if len(q.queue) > 0 {
			key = q.queue[0]
			q.queue[0] = ""
			q.queue = q.queue[1:]
			now := q.clock.Now()
			q.metrics.depth.Dec()
			q.metrics.queueDuration.Observe((now.Sub(q.epoch) - q.dirty[key]).Seconds())
			delete(q.dirty, key)
			q.processing[key] = now
			if len(q.queue) > 0 {
				q.handOff()
			} else {
				q.queue = nil // nor keeps the burst's array
			}
			if len(q.dirty) == 0 && q.dirtyPeak > keepDirtyRoom {
				q.dirty, q.dirtyPeak = map[string]time.Duration{}, 0
			}
			q.mu.Unlock()
			return key, true
		}
		q.mu.Unlock()
		select {
		case <-q.work:
		case <-q.stop:
		case <-ctx.Done():
			return "", false
		}
	}
}

// Done marks key processed. If it was added while being processed it goes
// back on the queue.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if start, ok := q.processing[key]; ok {
		q.metrics.workDuration.Observe(q.clock.Now().Sub(start).Seconds())
	}
	delete(q.processing, key)
	if _, ok := q.dirty[key]; ok && !q.shuttingDown {
		q.queue = append(q.queue, key)
		q.metrics.depth.Inc()
		q.handOff()
	}
	q.wake()
}

// Len returns the number of keys waiting (not delayed, not processing).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Idle reports whether no key is waiting, delayed or being processed.
func (q *Queue) Idle() bool {
	q.mu.Lock()
	busy := q.activeLocked()
	q.mu.Unlock()
	q.waitingMu.Lock()
	defer q.waitingMu.Unlock()
	return !busy && len(q.waiting) == 0
}

// Active reports whether a key is waiting (not delayed) or being processed.
func (q *Queue) Active() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.activeLocked()
}

// activeLocked reports whether a key is waiting or being processed. q.mu
// must be held.
func (q *Queue) activeLocked() bool {
	return len(q.queue) > 0 || len(q.processing) > 0
}

// WaitInactive blocks until no key is waiting (delayed keys aside) or being
// processed, or ctx ends.
func (q *Queue) WaitInactive(ctx context.Context) error {
	return notify.Wait(ctx, &q.changed, func() bool { return !q.Active() })
}

// NextDelayed returns when the earliest delayed key becomes ready.
func (q *Queue) NextDelayed() (time.Time, bool) {
	q.waitingMu.Lock()
	defer q.waitingMu.Unlock()
	if len(q.waiting) == 0 {
		return time.Time{}, false
	}
	return q.waiting[0].at, true
}

// ShutDown stops the queue: Get returns ok=false from now on, adds are
// ignored and the delay goroutine exits before ShutDown returns.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	if q.shuttingDown {
		q.mu.Unlock()
		<-q.stopped
		return
	}
	q.shuttingDown = true
	q.metrics.depth.Sub(float64(len(q.queue)))
	q.queue = nil
	q.wake()
	q.mu.Unlock()
	close(q.stop)
	<-q.stopped
}

// ShuttingDown reports whether ShutDown has been called.
func (q *Queue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// wake releases every WaitInactive waiting for a change. q.mu must be
// held.
func (q *Queue) wake() { q.changed.Notify() }

// handOff wakes one Get waiting for a key, unless one is already to be
// woken. q.mu must be held.
func (q *Queue) handOff() {
	select {
	case q.work <- struct{}{}:
	default:
	}
}

// delayLoop moves delayed keys onto the queue when their time comes.
func (q *Queue) delayLoop() {
	defer close(q.stopped)
	var timer clock.Timer
	stopTimer := func() {
		if timer != nil {
			timer.Stop()
			timer = nil
		}
	}
	defer stopTimer()
	for {
		now := q.clock.Now()
		var ready []string
		var next time.Time
		q.waitingMu.Lock()
		for len(q.waiting) > 0 && !q.waiting[0].at.After(now) {
			w := heap.Pop(&q.waiting).(*delayed)
			delete(q.waitIndex, w.key)
			ready = append(ready, w.key)
		}
		if len(q.waiting) > 0 {
			next = q.waiting[0].at
		}
		q.waitingMu.Unlock()
		for _, k := range ready {
			q.Add(k)
		}
		stopTimer()
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = q.clock.NewTimer(next.Sub(now))
			fire = timer.C()
			// The clock may have moved past next since now was read (a
			// fake clock set to exactly next, before this timer existed,
			// would leave it pending until a later step): look again.
			if !q.clock.Now().Before(next) {
				continue
			}
		}
		select {
		case <-q.stop:
			return
		case <-q.kick:
		case <-fire:
		}
	}
}

type delayed struct {
	key   string
	at    time.Time
	index int
}

type delayHeap []*delayed

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h delayHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *delayHeap) Push(x any) {
	w := x.(*delayed)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *delayHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return w
}
