package console

import (
	"bytes"
	"context"
	"sync"

	"github.com/fleetd-dev/fleetd/internal/sse"
)

// livePages renders the live part of each page once per change of the
// fleet and shares it between every event stream showing that page (the
// overview, or one member's page): however many browsers follow a page,
// a change costs one rendering, one read of a blocked agent's screen and
// one encoding of the event, and every stream writes that same frame —
// none keeps a copy of its own.
type livePages struct {
	mu    sync.Mutex
	pages map[string]*livePage // by member; "" is the overview
}

// livePage is one page's last rendering and the streams that show it.
type livePage struct {
	streams int // guarded by livePages.mu

	mu sync.Mutex
	// The last rendering, current while the two change channels are the
	// ones it was made under.
	members, messages <-chan struct{}
	version           uint64 // grows when the rendering differs from the last; 0: none yet
	frame             []byte // the rendering as an "update" event; nil when the page is gone
	// rendering is closed when the rendering in progress is done; nil when
	// none is.
	rendering chan struct{}
	// tails are the page's terminal reads, once per state of an agent; only
	// the one rendering at a time uses them.
	tails tailCaches
}

// open returns the page of member ("" the overview) for a new stream.
func (l *livePages) open(member string) *livePage {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pages == nil {
		l.pages = map[string]*livePage{}
	}
	p := l.pages[member]
	if p == nil {
		p = &livePage{tails: tailCaches{}}
		l.pages[member] = p
	}
	p.streams++
	return p
}

// close forgets the page with its last stream.
func (l *livePages) close(member string, p *livePage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.streams--; p.streams == 0 && l.pages[member] == p {
		delete(l.pages, member)
	}
}

// current returns the page's rendering under the change channels members
// and messages (taken before the state is read), rendering it once with
// render if no stream has yet; version tells a stream whether it sent it
// already. A nil frame means the page is gone. It waits for a rendering in
// progress, or for ctx.
func (p *livePage) current(ctx context.Context, members, messages <-chan struct{}, render func(tailCaches) (string, bool)) (frame []byte, version uint64, err error) {
	for {
		p.mu.Lock()
		if p.version > 0 && p.members == members && p.messages == messages {
			defer p.mu.Unlock()
			return p.frame, p.version, nil
		}
		if p.rendering == nil {
			break
		}
		busy := p.rendering
		p.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	done := make(chan struct{})
	p.rendering = done
	p.mu.Unlock()

	html, found := render(p.tails)
	var next []byte
	if found {
		next, _ = sse.Append(nil, sse.Event{Name: "update", Data: []byte(html)}) // a constant name: it frames
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.version == 0 || (next == nil) != (p.frame == nil) || !bytes.Equal(next, p.frame) {
		p.version++
		p.frame = next
	}
	p.members, p.messages = members, messages
	p.rendering = nil
	close(done)
	return p.frame, p.version, nil
}
