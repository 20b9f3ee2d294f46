package etcdtest

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
)

// Proxy forwards TCP to an etcd endpoint, for a test that takes etcd away
// from a client without stopping it: Cut drops every connection and takes
// no new one, as when a machine dies; Switch sends the next connections to
// another etcd and drops the open ones, as when etcd is replaced behind the
// same address (restored from a backup, restored empty).
type Proxy struct {
	l      net.Listener
	mu     sync.Mutex
	target string // host:port
	conns  []net.Conn
	cut    bool
	wg     sync.WaitGroup
}

// StartProxy starts a proxy on a free loopback port to endpoint (an etcd
// client URL). Cut stops it.
func StartProxy(endpoint string) (*Proxy, error) {
	host, err := hostOf(endpoint)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: proxy: %w", err)
	}
	p := &Proxy{l: l, target: host}
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
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(up, c); up.Close() })
		p.wg.Go(func() { io.Copy(c, up); c.Close() })
	}
}

// URL is the proxy's client URL.
func (p *Proxy) URL() string { return "http://" + p.l.Addr().String() }

// Switch sends the next connections to endpoint and drops the open ones.
func (p *Proxy) Switch(endpoint string) error {
	host, err := hostOf(endpoint)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.target = host
	p.mu.Unlock()
	p.drop()
	return nil
}

// Cut drops every connection, takes no new one, and returns once the
// proxy's goroutines have ended. It may be called more than once.
func (p *Proxy) Cut() {
	p.l.Close()
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
	p.drop()
	p.wg.Wait()
}

// drop closes the open connections.
func (p *Proxy) drop() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
