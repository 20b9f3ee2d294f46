package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/sse"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// The member watch: GET /members?watch=1 answers with a server-sent event
// stream (text/event-stream) instead of a list. It opens with one ADDED
// event per member and a SYNCED event, then sends one ADDED, MODIFIED or
// DELETED event per change of a member (its spec, labels or status), the
// way a Kubernetes watch does:
//
//	event: MODIFIED
//	data: {"type":"MODIFIED","object":{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member",…}}
//
// Nothing polls. One subscription to the controllers' status changes
// ([MemberWaiter.WaitFor], whose condition runs after every change) feeds
// every watcher: it runs while at least one watcher is connected, diffs the
// members against the last state it saw and queues the changed members'
// events on each watcher's buffer without ever waiting for one. A watcher
// whose buffer is full — a client reading slower than the fleet changes —
// is dropped with an ERROR event (code too_slow) rather than holding up
// the others; a client that stops reading altogether is cut by the
// listener's write deadline. A buffer is bounded by events and by bytes
// (the frames are encoded once and shared by every watcher, so what the
// watchers hold together is at most one buffer's worth). A comment line
// (": heartbeat") every [DefaultWatchHeartbeat] keeps proxies and idle
// timeouts from closing a quiet stream. A worker token holds at most
// [Options.MaxWatchersPerToken] streams, all tokens together
// [Options.MaxWatchers], a quarter of them the primary's alone; one more is
// refused with 429. Each stream is a held call (limits.go).

// Watch defaults.
const (
	DefaultWatchHeartbeat      = 15 * time.Second
	DefaultMaxWatchersPerToken = 8
	DefaultMaxWatchers         = 64
	// watchBuffer and watchBufferBytes are how many events, and how many
	// bytes of them, one watcher may have queued before it is dropped as
	// too slow: a change of every member of a large fleet at once still
	// fits, and so do several of the largest members (api/v1alpha1's
	// MaxObjectJSONBytes).
	watchBuffer      = 512
	watchBufferBytes = 16 << 20
)

// Watch event types.
const (
	WatchAdded    = "ADDED"
	WatchModified = "MODIFIED"
	WatchDeleted  = "DELETED"
	// WatchSynced follows the initial ADDED events: what comes after it
	// is a change.
	WatchSynced = "SYNCED"
	// WatchError ends a stream the server gave up on; its object is an
	// [APIError].
	WatchError = "ERROR"
)

// WatchEvent is the data of one event of the member watch.
type WatchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object,omitempty"`
}

// watchHub fans the controllers' member changes out to the open watch
// streams.
type watchHub struct {
	source MemberSource
	waiter MemberWaiter

	mu       sync.Mutex
	watchers map[*watcher]struct{}
	sub      *subscription         // the running subscription; nil with no watchers
	last     map[string]watchEntry // member name → as last sent, for join
	stop     context.CancelFunc    // stops sub
	done     context.Context       // the handler's streams: ended by Handler.EndStreams
}

// subscription is one run of the controllers' change feed. Only its own
// goroutine reads and replaces prev; a replaced subscription (the watchers
// left and came back) publishes nothing.
type subscription struct {
	prev map[string]watchEntry
}

// watchEntry is a member as last sent: the value, to tell cheaply whether
// it changed (reflect.DeepEqual is a few times faster than encoding it
// again), and its JSON.
type watchEntry struct {
	member v1alpha1.Member
	json   []byte
}

// watcher is one open stream: the frames queued for it (and their bytes)
// and the signal that it was dropped.
type watcher struct {
	frames  chan []byte
	queued  atomic.Int64
	dropped chan struct{}
}

// newWatchHub returns a hub whose streams end, and which refuses new ones,
// once done does.
func newWatchHub(done context.Context, source MemberSource, waiter MemberWaiter) *watchHub {
	h := &watchHub{source: source, waiter: waiter, watchers: map[*watcher]struct{}{}, done: done}
	context.AfterFunc(done, h.end)
	return h
}

// errWatchEnded is join's refusal once the handler's streams have ended.
var errWatchEnded = errors.New("fleetd is shutting down")

// join registers a watcher and returns it with the frames of the current
// state (ADDED for every member, then SYNCED): the state the watcher's
// later events are changes of.
func (h *watchHub) join() (*watcher, []byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done.Err() != nil {
		return nil, nil, errWatchEnded
	}
	if h.sub == nil {
		// The first watcher: the state now is what the subscription
		// diffs its first change against.
		h.last = map[string]watchEntry{}
		for _, m := range h.source.Members() {
			h.last[m.Name] = watchEntry{member: m, json: memberJSON(m)}
		}
		sub := &subscription{prev: h.last}
		ctx, cancel := context.WithCancel(context.Background())
		h.sub, h.stop = sub, cancel
		go func() {
			_ = h.waiter.WaitFor(ctx, func(all []v1alpha1.Member) bool {
				h.publish(sub, all)
				return false
			})
		}()
	}
	w := &watcher{frames: make(chan []byte, watchBuffer), dropped: make(chan struct{})}
	h.watchers[w] = struct{}{}
	var initial []byte
	for _, name := range sortedKeys(h.last) {
		initial = appendEvent(initial, WatchAdded, h.last[name].json)
	}
	return w, appendEvent(initial, WatchSynced, nil), nil
}

// leave unregisters w; the last watcher to leave stops the subscription.
func (h *watchHub) leave(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(w)
}

func (h *watchHub) removeLocked(w *watcher) {
	if _, ok := h.watchers[w]; !ok {
		return
	}
	delete(h.watchers, w)
	if len(h.watchers) == 0 && h.sub != nil {
		h.stop()
		h.sub, h.stop, h.last = nil, nil, nil
	}
}

// publish diffs all against the subscription's last state and queues the
// events on every watcher, dropping those with a full buffer. The diff is
// made before the lock is taken: join and leave do not wait for it.
func (h *watchHub) publish(sub *subscription, all []v1alpha1.Member) {
	var frames [][]byte
	next := make(map[string]watchEntry, len(all))
	for _, m := range all {
		old, ok := sub.prev[m.Name]
		if ok && reflect.DeepEqual(old.member, m) {
			next[m.Name] = old
			continue
		}
		e := watchEntry{member: m, json: memberJSON(m)}
		next[m.Name] = e
		switch {
		case !ok:
			frames = append(frames, appendEvent(nil, WatchAdded, e.json))
		case !bytes.Equal(old.json, e.json):
			frames = append(frames, appendEvent(nil, WatchModified, e.json))
		}
	}
	for _, name := range sortedKeys(sub.prev) {
		if _, ok := next[name]; !ok {
			frames = append(frames, appendEvent(nil, WatchDeleted, sub.prev[name].json))
		}
	}
	sub.prev = next
	if len(frames) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sub != sub {
		return
	}
	h.last = next
	for w := range h.watchers {
		for _, f := range frames {
			if w.queued.Add(int64(len(f))) <= watchBufferBytes {
				select {
				case w.frames <- f:
					continue
				default:
				}
			}
			close(w.dropped)
			h.removeLocked(w)
			break
		}
	}
}

// end drops every watcher (and so the subscription) once done has ended;
// join refuses new ones from then on.
func (h *watchHub) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		h.removeLocked(w)
	}
}

func memberJSON(m v1alpha1.Member) []byte {
	setMemberTypeMeta(&m)
	b, err := json.Marshal(m)
	if err != nil { // a Member is plain data; this does not happen
		b, _ = json.Marshal(map[string]any{"metadata": map[string]string{"name": m.Name}})
	}
	return b
}

// appendEvent appends one server-sent event to dst: its type as the event
// name and a [WatchEvent] as its data.
func appendEvent(dst []byte, typ string, object []byte) []byte {
	data, _ := json.Marshal(WatchEvent{Type: typ, Object: object})
	dst, _ = sse.Append(dst, sse.Event{Name: typ, Data: data}) // the types are constants that frame
	return dst
}

func sortedKeys(m map[string]watchEntry) []string { return slices.Sorted(maps.Keys(m)) }

// isWatch reports whether a GET /members asks for the watch stream:
// ?watch=1 or ?watch=true.
func isWatch(r *http.Request) bool {
	switch strings.ToLower(r.URL.Query().Get("watch")) {
	case "1", "true":
		return true
	}
	return false
}

// watchMembers serves the member watch stream.
func (s *restServer) watchMembers(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
	if s.watch == nil {
		writeError(w, http.StatusNotImplemented, codeUnavailable, "this fleetd has no member status stream to watch")
		return
	}
	if accept := r.Header.Get("Accept"); accept != "" && !acceptsEventStream(accept) {
		writeError(w, http.StatusNotAcceptable, "not_acceptable", "a watch answers with text/event-stream; send Accept: text/event-stream")
		return
	}
	if _, ok := w.(http.Flusher); !ok {
		writeError(w, http.StatusInternalServerError, codeInternal, "this connection cannot stream")
		return
	}
	release, te := s.holdStream(s.watches, "watch streams", id)
	if te != nil {
		writeToolError(w, te)
		return
	}
	defer release()
	wt, initial, err := s.watch.join()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, err.Error())
		return
	}
	defer s.watch.leave(wt)
	sw, err := sse.Start(w)
	if err != nil || sw.WriteEncoded(initial) != nil {
		return
	}
	beat := cmp.Or(s.opts.WatchHeartbeat, DefaultWatchHeartbeat)
	clk := s.opts.Clock
	for {
		t := clk.NewTimer(beat)
		goOn := s.watchStep(r.Context(), wt, t, sw)
		t.Stop()
		if !goOn {
			return
		}
	}
}

// watchStep writes what comes first — queued frames, a heartbeat when t
// fires — and reports whether the stream goes on.
func (s *restServer) watchStep(ctx context.Context, wt *watcher, t clock.Timer, sw *sse.Writer) bool {
	select {
	case f := <-wt.frames:
		// Send what else is queued with it, each frame as it was encoded
		// once for every watcher, then flush once.
		frames := [][]byte{f}
		for more := true; more; {
			select {
			case f := <-wt.frames:
				frames = append(frames, f)
			default:
				more = false
			}
		}
		for _, f := range frames {
			wt.queued.Add(-int64(len(f)))
		}
		return sw.WriteEncoded(frames...) == nil
	case <-wt.dropped:
		var body APIError
		body.Error.Code = "too_slow"
		body.Error.Message = fmt.Sprintf("this watch fell more than %d events (or %d MiB) behind and was dropped; watch again", watchBuffer, watchBufferBytes>>20)
		b, _ := json.Marshal(body)
		_ = sw.WriteEncoded(appendEvent(nil, WatchError, b))
		return false
	case <-t.C():
		return sw.Comment("heartbeat") == nil
	case <-s.watch.done.Done():
		return false
	case <-ctx.Done():
		return false
	}
}

func acceptsEventStream(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case "text/event-stream", "text/*", "*/*":
			return true
		}
	}
	return false
}
