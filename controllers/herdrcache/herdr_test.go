package herdrcache

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/herdr"
)

// Herdr reports what herdr's last ping answered — nothing before one, and
// the new herdr's version once another one answers — for a node's
// registration to publish.
func TestCache_HerdrIsTheLastPingsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fixture()
		f.pong = &herdr.Pong{Version: "0.9.3", Protocol: 22}
		c := New(f, &testOpts)
		if v, p := c.Herdr(); v != "" || p != 0 {
			t.Errorf("before a ping: Herdr() = %q, %d; want nothing", v, p)
		}
		defer runCache(t, c)()
		synctest.Wait()
		if v, p := c.Herdr(); v != "0.9.3" || p != 22 {
			t.Errorf("Herdr() = %q, %d; want 0.9.3, 22", v, p)
		}
		f.setDown(true)
		synctest.Wait()
		f.mu.Lock()
		f.pong = &herdr.Pong{Version: "0.10.0", Protocol: 23}
		f.mu.Unlock()
		f.setDown(false)
		time.Sleep(testOpts.MaxReconnect)
		synctest.Wait()
		if v, p := c.Herdr(); v != "0.10.0" || p != 23 {
			t.Errorf("after herdr came back: Herdr() = %q, %d; want 0.10.0, 23", v, p)
		}
	})
}
