package fleetmsg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// keys names the relay's keys under PREFIX/msg/.
type keys struct{ base string }

func (k keys) requests(node string) string    { return k.base + "requests/" + node + "/" }
func (k keys) request(node, id string) string { return k.requests(node) + id }
func (k keys) turn(id string) string          { return k.base + "turns/" + id }
func (k keys) mailbox() string                { return k.base + "mailbox/" }
func (k keys) mail(id string) string          { return k.mailbox() + id }
func (k keys) acked(id string) string         { return k.base + "acked/" + id }
func (k keys) waitingDir() string             { return k.base + "waiting/" }
func (k keys) waiting(turn string) string     { return k.waitingDir() + turn }

// maxHeaderBytes bounds the JSON header of a stored value; the content
// follows it and is bounded by Options.MaxContentBytes.
const maxHeaderBytes = 4096

// header is what a request or a fleet message says besides its content.
// A value is the header as one JSON line, a newline, then the content as
// is: content is never escaped, so a value is at most its content plus
// maxHeaderBytes, whatever the content holds.
type header struct {
	// Requests: the turn (for a new turn, the request's id), a
	// continuation's own id, the worker, the absolute deadline, the node
	// that wrote it.
	Turn     string    `json:"turn,omitempty"`
	Request  string    `json:"request,omitempty"`
	Continue bool      `json:"continue,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"`
	Origin   string    `json:"origin,omitempty"`

	// Both.
	From string `json:"from"`
	To   string `json:"to"`

	// Fleet messages: the kind, when the worker's core stored it, the
	// node, and for a refused request the core's error code.
	Kind      messaging.Kind `json:"kind,omitempty"`
	CreatedAt time.Time      `json:"createdAt,omitzero"`
	Node      string         `json:"node,omitempty"`
	Code      messaging.Code `json:"code,omitempty"`
}

func encode(h header, content string) (string, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return "", err
	}
	if len(b) > maxHeaderBytes {
		return "", fmt.Errorf("header of %d bytes, over %d", len(b), maxHeaderBytes)
	}
	return string(b) + "\n" + content, nil
}

func decode(value []byte, maxContent int) (header, string, error) {
	var h header
	i := bytes.IndexByte(value, '\n')
	if i < 0 || i > maxHeaderBytes {
		return h, "", errors.New("no header line")
	}
	if len(value)-i-1 > maxContent {
		return h, "", fmt.Errorf("content of %d bytes, over %d", len(value)-i-1, maxContent)
	}
	dec := json.NewDecoder(bytes.NewReader(value[:i]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, "", err
	}
	return h, string(value[i+1:]), nil
}

// location is PREFIX/msg/turns/ID: where a turn's worker runs, for a
// continuation from any node.
type location struct {
	Node     string    `json:"node"`
	Worker   string    `json:"worker"`
	Caller   string    `json:"caller"`
	Deadline time.Time `json:"deadline,omitzero"`
}

// turnLocation reads where turn id is; found is false when etcd has no
// location for it.
func (r *Relay) turnLocation(ctx context.Context, id string) (location, bool, error) {
	if checkSegment(id) != nil {
		return location{}, false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	resp, err := r.cli.Get(rctx, r.keys.turn(id))
	if err != nil {
		return location{}, false, unavailable("read turn "+id, err)
	}
	if len(resp.Kvs) == 0 {
		return location{}, false, nil
	}
	var loc location
	if len(resp.Kvs[0].Value) > maxHeaderBytes || json.Unmarshal(resp.Kvs[0].Value, &loc) != nil || loc.Node == "" {
		r.o.Logger.Error("etcd holds a turn location that does not decode; ignored", "key", r.keys.turn(id))
		return location{}, false, nil
	}
	return loc, true, nil
}

// checkSegment reports whether s can be one key segment of ours: an id
// the relay or a core made, or a node name.
func checkSegment(s string) error {
	if s == "" || len(s) > 2*messaging.MaxRequestIDBytes {
		return errors.New("empty or too long")
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q holds %q", s, c)
		}
	}
	return nil
}

// leaseCache hands out leases that expire at about a given time: one per
// minute of expiry, granted when first needed and never renewed, so that
// tombstones and turn locations cost no request of their own and go on
// their own.
type leaseCache struct {
	cli     *clientv3.Client
	clock   clock.Clock
	timeout time.Duration
	mu      sync.Mutex // never held over a request
	leases  map[time.Time]clientv3.LeaseID
}

// until returns a lease that expires within a minute after t.
func (c *leaseCache) until(ctx context.Context, t time.Time) (clientv3.LeaseID, error) {
	bucket := t.Truncate(time.Minute).Add(time.Minute)
	now := c.clock.Now()
	c.mu.Lock()
	for b := range c.leases {
		if b.Before(now.Add(time.Minute)) {
			delete(c.leases, b) // too close to expiry to hand out
		}
	}
	id, ok := c.leases[bucket]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.cli.Grant(rctx, int64(bucket.Sub(now)/time.Second)+1)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.leases[bucket] = resp.ID
	c.mu.Unlock()
	return resp.ID, nil
}

// forget drops a lease etcd no longer has (it was revoked, or etcd's
// data was restored).
func (c *leaseCache) forget(id clientv3.LeaseID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for b, l := range c.leases {
		if l == id {
			delete(c.leases, b)
		}
	}
}

// txnWithLease runs the transaction build makes with a lease that
// expires about at t, once more with a fresh lease if etcd lost the
// cached one.
func (r *Relay) txnWithLease(ctx context.Context, t time.Time, build func(ctx context.Context, lease clientv3.LeaseID) clientv3.Txn) (*clientv3.TxnResponse, error) {
	for attempt := 0; ; attempt++ {
		lease, err := r.leases.until(ctx, t)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
		resp, err := build(rctx, lease).Commit()
		cancel()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			r.leases.forget(lease)
			continue
		}
		return resp, err
	}
}
