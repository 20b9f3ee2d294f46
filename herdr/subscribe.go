package herdr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// streamBuffer is how many decoded events a Stream holds for a slow reader
// before it stops reading the socket (herdr then gives up on the connection
// after its 5 s write timeout, which surfaces as ErrStreamDropped).
const streamBuffer = 64

// Stream is a live events.subscribe connection. Read events from Events until
// it is closed, then look at Err.
type Stream struct {
	events chan Event
	stopCh chan struct{} // closed by Close
	exited chan struct{} // closed when the reader goroutine returns
	x      *exchange
	ctx    context.Context

	closeOnce sync.Once
	mu        sync.Mutex
	err       error
}

// Subscribe opens an events.subscribe stream and waits for herdr's
// subscription_started ack. A refusal (for example pane_not_found for a
// per-pane subscription) is returned as an *Error. herdr 0.8.2 (protocol 20)
// may start global subscriptions with replays of recent events it still
// buffers (filter by id); herdr 0.9 (protocol 22) starts at the current
// event and replays nothing, so subscribe first, then take a snapshot
// ([Client.Snapshot]) and treat events as invalidations.
//
// The stream ends when ctx is cancelled or Close is called (Err is nil), or
// when herdr closes the connection, sends an error line or sends something
// that is not an event (Err matches ErrStreamDropped; resubscribe). A stream
// herdr closed with events_lost (the subscriber fell behind herdr's retained
// history) also matches ErrEventsLost: resubscribe, then resync from a
// snapshot. Events of kinds this package does not model are delivered with
// only Kind, Name and Data set.
func (c *Client) Subscribe(ctx context.Context, subs []Subscription) (*Stream, error) {
	const method = "events.subscribe"
	start := c.now()
	params := struct {
		Subscriptions []Subscription `json:"subscriptions"`
	}{nonNil(subs)}
	x, code, err := c.send(ctx, method, params, streamReadBuffer)
	if err == nil {
		code, err = x.receive(ctx, "subscription_started", nil)
		if err != nil {
			x.close()
		}
	}
	c.report(method, code, start)
	if err != nil {
		return nil, err
	}
	s := &Stream{
		events: make(chan Event, streamBuffer),
		stopCh: make(chan struct{}),
		exited: make(chan struct{}),
		x:      x,
		ctx:    ctx,
	}
	go s.run()
	return s, nil
}

// Events delivers decoded events in herdr's order. It is closed when the
// stream ends.
func (s *Stream) Events() <-chan Event { return s.events }

// Err reports why the stream ended: nil while it runs and after a clean end
// (context cancelled or Close), an error matching ErrStreamDropped otherwise.
// A dropped stream's error also matches ErrUnavailable if the connection
// broke or carried garbage, or wraps an *Error if herdr sent an error line
// (and matches ErrEventsLost for events_lost).
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the stream and waits for its reader goroutine to exit. It is
// safe to call more than once and concurrently with reading Events.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		close(s.stopCh)
		s.x.close()
	})
	<-s.exited
	return nil
}

func (s *Stream) stopped() bool {
	select {
	case <-s.stopCh:
		return true
	default:
		return s.ctx.Err() != nil
	}
}

func (s *Stream) run() {
	defer close(s.exited)
	defer close(s.events)
	defer s.x.close()
	for {
		line, err := s.x.r.ReadBytes('\n')
		if err != nil {
			if s.stopped() {
				return
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			s.fail(&TransportError{Method: s.x.method, Reason: ReasonClosed,
				Err: fmt.Errorf("%w: %w", ErrStreamDropped, err)})
			return
		}
		ev, err := decodeStreamLine(line)
		if err != nil {
			if !s.stopped() {
				s.fail(err)
			}
			return
		}
		select {
		case s.events <- ev:
		case <-s.stopCh:
			return
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Stream) fail(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// decodeStreamLine decodes one line after the ack: an event in either envelope
// style, or herdr's error envelope (which ends the stream).
func decodeStreamLine(line []byte) (Event, error) {
	const method = "events.subscribe"
	// One decoding of the line tells an event from herdr's error and
	// keeps the event's data for Event.decode.
	var env struct {
		envelope
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return Event{}, &TransportError{Method: method, Reason: ReasonBadResponse,
			Err: fmt.Errorf("%w: undecodable line %.200q: %w", ErrStreamDropped, line, err)}
	}
	if env.Error != nil && env.Event == nil {
		herr := &Error{Method: method, Code: env.Error.Code, Message: env.Error.Message}
		if herr.Code == "events_lost" {
			return Event{}, fmt.Errorf("%w: %w: %w", ErrStreamDropped, ErrEventsLost, herr)
		}
		return Event{}, fmt.Errorf("%w: %w", ErrStreamDropped, herr)
	}
	var ev Event
	if err := ev.decode(env.envelope, line); err != nil {
		return Event{}, &TransportError{Method: method, Reason: ReasonBadResponse,
			Err: fmt.Errorf("%w: %w", ErrStreamDropped, err)}
	}
	return ev, nil
}

// WaitEvent waits for one event matching p (events.wait) and returns it. It
// returns at once if the pane already matches. A long call: cancelling ctx
// closes the connection.
func (c *Client) WaitEvent(ctx context.Context, p EventsWaitParams) (*Event, error) {
	var r struct {
		resultTag
		Event Event `json:"event"`
	}
	if err := c.call(ctx, "events.wait", p, "wait_matched", &r); err != nil {
		return nil, err
	}
	return &r.Event, nil
}
