package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/mcp"
)

// This file holds issue 24's slow-client fault: hostile clients that try
// to hold the listener — request bodies sent a byte at a time, with no
// token and with a worker's, renewed as the listener closes them; one
// worker token holding as many waits (GET /inbox?wait=true) as it can; and
// event streams (the member watch) whose readers stopped reading — while
// /healthz and the primary's calls must answer within answerWithin every
// time the schedule looks, from the step that starts them to the one that
// ends them. Latency is measured with the real clock: this is the whole
// system's behaviour, and nothing waits for it to pass.

// answerWithin is how fast /healthz and the primary's calls must answer
// while the hostile clients are on.
const answerWithin = time.Second

// The hostile clients' numbers: more slow bodies than the listener has
// connections, twice as many waits as that from one worker, and the watch
// streams one (other) worker token may hold.
const (
	hostileBodies  = chaosConns + 8
	hostileWaits   = 2 * chaosConns
	hostileWatches = mcp.DefaultMaxWatchersPerToken
)

// Tokens of the hostile workers: w0's waits, w9's stalled watches (any
// member name is a worker to the chaos fleet's tokens).
const hostileWaiter, hostileWatcher = "w0", "w9"

// hostile is the set of hostile clients while they are on.
type hostile struct {
	bodies  []net.Conn // slow bodies, renewed each step
	stalled []net.Conn // watch streams nobody reads
	stop    context.CancelFunc
	waits   sync.WaitGroup // the held waits, until stop
	ended   chan struct{}  // a token per wait answered before stop (429, or closed for room)
	renewed int
}

// actHostile starts the hostile clients, renews their slow bodies, or
// ends them; each time, and after every later step while they are on,
// /healthz and the primary must answer within answerWithin.
func (w *world) actHostile(rng *rand.Rand) string {
	if w.fd == nil {
		return "hostile clients: (fleetd is down)"
	}
	if w.hostile == nil {
		w.hostile = w.startHostile()
		h := w.hostile
		// The worker holds at most its share; every other wait is answered
		// at once. Waited for, so that the probes meet the flood's result
		// rather than race its arrival.
		refused, want := 0, hostileWaits-mcp.DefaultMaxHeldPerToken
		deadline := time.NewTimer(probeTimeout)
		defer deadline.Stop()
		for ; refused < want; refused++ {
			select {
			case <-h.ended:
				continue
			case <-deadline.C:
				w.problem("hostile clients: only %d of the %d waits past the worker's share were answered within %s", refused, want, probeTimeout)
			}
			break
		}
		return fmt.Sprintf("hostile clients start: %d slow bodies, %d waits from %s (%d answered at once), %d stalled watches from %s",
			len(h.bodies), hostileWaits, hostileWaiter, refused, len(h.stalled), hostileWatcher)
	}
	if rng.IntN(3) == 0 {
		w.dropHostile("the schedule ends them")
		return "hostile clients end"
	}
	n := w.hostile.renew(w.fd.gw)
	return fmt.Sprintf("hostile clients renew %d slow bodies the listener closed", n)
}

func (w *world) startHostile() *hostile {
	gw := w.fd.gw
	ctx, stop := context.WithCancel(w.ctx)
	h := &hostile{stop: stop, ended: make(chan struct{}, hostileWaits)}
	for i := range hostileBodies {
		if c := slowBody(gw, i); c != nil {
			h.bodies = append(h.bodies, c)
		}
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for range hostileWaits {
		h.waits.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", gw.url+"/inbox?wait=true&timeoutMs=600000", nil)
			req.Header.Set("Authorization", "Bearer "+workerToken(hostileWaiter))
			resp, err := client.Do(req)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			h.ended <- struct{}{}
		})
	}
	for range hostileWatches {
		if c := stalledWatch(gw); c != nil {
			h.stalled = append(h.stalled, c)
		}
	}
	return h
}

// slowBody opens a connection that announces a body of 200 KB and sends
// two bytes of it: every other one without a token, the rest with a
// worker's, as a client feeding its body a byte at a time.
func slowBody(gw *gateway, i int) net.Conn {
	c, err := net.Dial("tcp", gw.addr)
	if err != nil {
		return nil
	}
	auth := ""
	if i%2 == 1 {
		auth = "Authorization: Bearer " + workerToken(hostileWaiter) + "\r\n"
	}
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 200000\r\n\r\n{\"", gw.addr, auth)
	return c
}

// stalledWatch opens the member watch with a receive buffer of 2 KiB and
// never reads it.
func stalledWatch(gw *gateway) net.Conn {
	c, err := smallReceiveBuffer.Dial("tcp", gw.addr)
	if err != nil {
		return nil
	}
	fmt.Fprintf(c, "GET /members?watch=1 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", gw.addr, workerToken(hostileWatcher))
	return c
}

// renew replaces the slow bodies the listener closed (to make room, or at
// its read timeout) with new ones, as an attacker renewing its connections
// does; it returns how many.
func (h *hostile) renew(gw *gateway) int {
	n := 0
	for i, c := range h.bodies {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		var buf [512]byte
		_, err := c.Read(buf[:])
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			continue // still open (an answer it reads here is a 401: the server closes it next)
		}
		c.Close()
		if nc := slowBody(gw, i); nc != nil {
			h.bodies[i] = nc
			n++
		}
	}
	h.renewed += n
	return n
}

// close ends every hostile client and waits for the waits to return.
func (h *hostile) close() {
	for _, c := range h.bodies {
		c.Close()
	}
	for _, c := range h.stalled {
		c.Close()
	}
	h.stop()
	h.waits.Wait()
}

// dropHostile ends the hostile clients, if they are on.
func (w *world) dropHostile(why string) {
	if w.hostile == nil {
		return
	}
	h := w.hostile
	w.hostile = nil
	h.close()
	w.record(fmt.Sprintf("hostile clients end (%s): %d slow bodies renewed", why, h.renewed))
}

// probeHostile checks that, while the hostile clients are on, /healthz and
// the primary's calls — a poll of its mailbox over REST, and bridge_status
// on a new MCP session — each answer within answerWithin. The probes dial
// their own connections, as a new client does: a connection kept alive
// from an earlier step may have been closed for room meanwhile.
func (w *world) probeHostile() string {
	gw := w.fd.gw
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var took []time.Duration
	timed := func(what string, do func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(w.ctx, probeTimeout)
		defer cancel()
		start := time.Now()
		err := do(ctx)
		d := time.Since(start)
		took = append(took, d.Round(time.Millisecond))
		switch {
		case err != nil:
			w.problem("while hostile clients hold the listener, %s failed after %s: %v", what, d, err)
		case d > answerWithin:
			w.problem("while hostile clients hold the listener, %s took %s, over %s", what, d, answerWithin)
		}
	}
	get := func(path, token string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", gw.url+path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", path, resp.Status)
			}
			return nil
		}
	}
	timed("/healthz", get("/healthz", ""))
	timed("the primary's GET /inbox", get("/inbox", primaryToken))
	timed("the primary's bridge_status on a new session", func(ctx context.Context) error {
		cs, err := gw.connectWith(ctx, primaryToken, tr)
		if err != nil {
			return err
		}
		defer cs.Close()
		var st mcp.StatusOutput
		code, err := callTool(ctx, cs, "bridge_status", map[string]any{}, &st)
		if err == nil && code != "" {
			err = errors.New(code)
		}
		return err
	})
	return fmt.Sprintf("probe under hostile clients: /healthz %s, primary's inbox %s, primary's bridge_status %s", took[0], took[1], took[2])
}
