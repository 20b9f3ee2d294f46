package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Proxy is a TCP proxy between one client (a fleetd node) and one etcd
// member that injects the network's faults: it passes bytes as they come
// ([Proxy.Pass]), holds them in one direction or both — a black hole: the
// sender's writes succeed, nothing arrives, and what was held arrives when
// the fault ends, as TCP delivers after a partition heals unless a
// keep-alive gave up on the connection first ([Proxy.BlackHole],
// [Proxy.HalfOpen]) — delays them ([Proxy.Delay]), or cuts every
// connection and refuses new ones, as a machine that died ([Proxy.Cut]).
// A fault applies to the connections open and to new ones, which it
// accepts (a black hole shows no refusal). [Proxy.Switch] sends the next
// connections to another etcd and drops the open ones, as when etcd is
// replaced behind the same address (restored from a backup, or empty).
type Proxy struct {
	l net.Listener

	mu     sync.Mutex
	target string   // host:port
	faults [2]fault // by direction: toServer, toClient
	conns  map[net.Conn]struct{}
	cut    bool
	change notify.Signal
	wg     sync.WaitGroup
}

// The directions of a Proxy's bytes.
const (
	toServer = iota
	toClient
)

// fault is what happens to one direction's bytes: held while hold is
// set, else forwarded delay after they came in.
type fault struct {
	hold  bool
	delay time.Duration
}

// StartProxy listens on a free loopback port and forwards every
// connection to endpoint (an etcd client URL), passing everything until a
// fault is set. Cut stops it.
func StartProxy(endpoint string) (*Proxy, error) {
	host, err := hostOf(endpoint)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: proxy: %w", err)
	}
	p := &Proxy{l: l, target: host, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

func hostOf(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("etcdtest: proxy to %q: want an etcd client URL", endpoint)
	}
	return u.Host, nil
}

// URL is the proxy's address as an etcd endpoint.
func (p *Proxy) URL() string { return "http://" + p.l.Addr().String() }

// Pass ends every fault: held bytes flow, new ones pass at once.
func (p *Proxy) Pass() { p.set(fault{}, fault{}) }

// BlackHole holds every byte both ways: a partition.
func (p *Proxy) BlackHole() { p.set(fault{hold: true}, fault{hold: true}) }

// HalfOpen passes the client's bytes to etcd and holds etcd's answers:
// etcd hears the node (its lease renewed, its writes made) and the node
// hears nothing.
func (p *Proxy) HalfOpen() { p.set(fault{}, fault{hold: true}) }

// Delay forwards every byte, both ways, d after it came in.
func (p *Proxy) Delay(d time.Duration) { p.set(fault{delay: d}, fault{delay: d}) }

func (p *Proxy) set(server, client fault) {
	p.mu.Lock()
	p.faults = [2]fault{server, client}
	p.mu.Unlock()
	p.change.Notify()
}

// Switch sends the next connections to endpoint (an etcd client URL) and
// drops the open ones.
func (p *Proxy) Switch(endpoint string) error {
	host, err := hostOf(endpoint)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.target = host
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	return nil
}

// Cut closes every connection, refuses new ones for good, and returns once
// the proxy's goroutines have ended. It may be called more than once.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.l.Close()
	for c := range conns {
		c.Close()
	}
	p.change.Notify()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		up, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(up, c, toServer) })
		p.wg.Go(func() { p.pipe(c, up, toClient) })
	}
}

// chunk is bytes read from one side, stamped with when they came in.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst under direction dir's fault: a reader stamps
// what comes in, a writer forwards it when the fault lets it. Either side
// closing closes both.
func (p *Proxy) pipe(dst, src net.Conn, dir int) {
	defer p.drop(dst, src)
	queue := make(chan chunk, 256)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(queue)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				queue <- chunk{b: buf[:n], at: time.Now()}
			}
			if err != nil {
				return
			}
		}
	})
	defer wg.Wait()
	for c := range queue {
		if !p.await(dir, c.at) {
			src.Close()
			continue // drain, so that the reader ends
		}
		if _, err := dst.Write(c.b); err != nil {
			src.Close()
		}
	}
}

// await waits until bytes of direction dir that came in at are due: not
// held, and their delay passed. false once the proxy is cut.
func (p *Proxy) await(dir int, at time.Time) bool {
	for {
		ch := p.change.Changed()
		p.mu.Lock()
		f, cut := p.faults[dir], p.cut
		p.mu.Unlock()
		if cut {
			return false
		}
		if f.hold {
			<-ch
			continue
		}
		left := time.Until(at.Add(f.delay))
		if left <= 0 {
			return true
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

func (p *Proxy) drop(conns ...net.Conn) {
	p.mu.Lock()
	for _, c := range conns {
		delete(p.conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
