// Package sse is fleetd's one implementation of server-sent events (the
// WHATWG event-stream format): the [Writer] of every stream fleetd serves
// (the REST watch, log follows, the console) and the [Reader] of every
// client of one (`fleetd get -w`, `fleetd logs -f`, `fleetd mcp-bridge`).
//
// Framing is the one place a stream can be forged, so it is done here once.
// [Append] writes an event's data as one "data:" line per line of the data,
// split at every line terminator the format knows — CRLF, a bare CR and LF
// — so that no text, however hostile, ends the event early or starts a
// field of its own; a name or id with a line terminator (or an id with NUL,
// which readers ignore) is refused with [ErrInvalid]. A reader gets the data
// back with its lines joined by LF: text round-trips exactly except that
// every line terminator in it reads back as LF, as a browser's EventSource
// reads it too.
//
// [Reader] follows the format's parsing rules (CRLF, CR or LF ends a line; a
// leading BOM is skipped; comments and unknown fields are ignored; an event
// without data is not dispatched; an event cut off by the end of the stream
// is dropped) and bounds each event: one longer than its limit is an
// [ErrTooLong] error, never an unbounded buffer.
//
// It never does: buffer more than one event on either side, or write
// anything but complete events and comments.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Event is one server-sent event.
type Event struct {
	// Name is the event type (the "event" field); "" is the default type,
	// message.
	Name string
	// ID is the event's id (the "id" field); "" writes none.
	ID string
	// Data is the payload, any bytes; its line terminators read back as LF.
	Data []byte
}

// ErrInvalid is returned for an event or comment that cannot be framed: a
// name, id or comment with a line terminator, or an id with NUL.
var ErrInvalid = errors.New("sse: a field that cannot be framed")

// Append appends ev's wire form — its fields, a data line per line of
// Data (at least one), and the blank line that ends it — to dst.
func Append(dst []byte, ev Event) ([]byte, error) {
	if strings.ContainsAny(ev.Name, "\r\n") {
		return dst, fmt.Errorf("%w: event name %q", ErrInvalid, ev.Name)
	}
	if strings.ContainsAny(ev.ID, "\r\n\x00") {
		return dst, fmt.Errorf("%w: event id %q", ErrInvalid, ev.ID)
	}
	if ev.Name != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, ev.Name...)
		dst = append(dst, '\n')
	}
	if ev.ID != "" {
		dst = append(dst, "id: "...)
		dst = append(dst, ev.ID...)
		dst = append(dst, '\n')
	}
	data := ev.Data
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, '\n', '\n'), nil
}

// AppendComment appends a comment line (": text", and the blank line after
// it), which readers ignore: a heartbeat that keeps a quiet stream open.
func AppendComment(dst []byte, text string) ([]byte, error) {
	if strings.ContainsAny(text, "\r\n") {
		return dst, fmt.Errorf("%w: comment %q", ErrInvalid, text)
	}
	dst = append(dst, ": "...)
	dst = append(dst, text...)
	return append(dst, '\n', '\n'), nil
}

// WriteError is a failed write or flush to the stream's client: the
// client went, or stopped reading.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "write event: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// Writer writes events to an HTTP response, flushing each.
type Writer struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
}

// Start answers the request with an event stream: it sets the headers of
// one (no caching, no proxy buffering), writes status 200 and flushes, so
// that the client sees the stream open before the first event.
func Start(w http.ResponseWriter) (*Writer, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := &Writer{w: w, rc: http.NewResponseController(w)}
	if err := sw.rc.Flush(); err != nil {
		return nil, &WriteError{err}
	}
	return sw, nil
}

// Send writes one event and flushes it.
func (w *Writer) Send(ev Event) error {
	b, err := Append(w.buf[:0], ev)
	if err != nil {
		return err
	}
	w.buf = b
	return w.WriteEncoded(b)
}

// Comment writes a comment and flushes it.
func (w *Writer) Comment(text string) error {
	b, err := AppendComment(w.buf[:0], text)
	if err != nil {
		return err
	}
	w.buf = b
	return w.WriteEncoded(b)
}

// WriteEncoded writes events already framed by [Append] — encoded once
// and shared by many streams, say: they are written as they are, never
// copied — and flushes them once.
func (w *Writer) WriteEncoded(frames ...[]byte) error {
	for _, f := range frames {
		if _, err := w.w.Write(f); err != nil {
			return &WriteError{err}
		}
	}
	if err := w.rc.Flush(); err != nil {
		return &WriteError{err}
	}
	return nil
}

// ErrTooLong is returned (wrapped, with the limit) for an event longer than
// the reader's limit.
var ErrTooLong = errors.New("sse: event too long")

// Reader reads events from a stream.
type Reader struct {
	r      io.Reader
	max    int
	buf    []byte // read from r, not yet consumed: buf[off:]
	off    int
	err    error  // r's error, once it gave one
	lastID string // the last id field read: it stays the id of later events
	skipLF bool   // the last line ended in CR: an LF right after it is that line's
	bom    bool   // the start was checked for a BOM
}

// NewReader returns a Reader of r whose events (the bytes of their lines)
// are at most max bytes each.
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{r: r, max: max}
}

// Next returns the next event. Its ID is the last id the stream gave,
// as the format says (an id stays until another replaces it). At the end of the stream it returns io.EOF
// (an event the stream cut off is dropped, as the format says); an event
// longer than the limit is an error matching ErrTooLong; r's own errors are
// returned as they are.
func (r *Reader) Next() (Event, error) {
	var ev Event
	var data []byte
	hasData := false
	size := 0
	for {
		line, err := r.line(r.max - size)
		if err != nil {
			return Event{}, err
		}
		size += len(line) + 1
		if len(line) == 0 {
			if !hasData {
				ev.Name = "" // the format resets the type of an event without data
				continue
			}
			ev.Data, ev.ID = data, r.lastID
			return ev, nil
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "": // a comment
		case "event":
			ev.Name = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			} else {
				data = []byte{}
			}
			data = append(data, value...)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = string(value)
			}
		}
	}
}

// line returns the next line without its terminator, of at most max bytes.
// The slice is valid until the next call.
func (r *Reader) line(max int) ([]byte, error) {
	scanned := 0 // of buf[off:], bytes known to hold no terminator
	for {
		rest := r.buf[r.off:]
		if r.skipLF && len(rest) > 0 {
			r.skipLF = false
			if rest[0] == '\n' {
				r.off++
				continue
			}
		}
		if !r.bom && (len(rest) >= 3 || r.err != nil) {
			r.bom = true
			if bytes.HasPrefix(rest, []byte("\xef\xbb\xbf")) {
				r.off += 3
				continue
			}
		}
		if r.bom {
			if i := bytes.IndexAny(rest[scanned:], "\r\n"); i >= 0 {
				i += scanned
				if i > max {
					return nil, fmt.Errorf("%w: an event longer than %d bytes", ErrTooLong, r.max)
				}
				r.skipLF = rest[i] == '\r'
				r.off += i + 1
				return rest[:i], nil
			}
			scanned = len(rest)
			if scanned > max {
				return nil, fmt.Errorf("%w: an event longer than %d bytes", ErrTooLong, r.max)
			}
		}
		if r.err != nil {
			if r.err == io.EOF && len(rest) > 0 {
				r.buf, r.off = r.buf[:0], 0 // a line the stream cut off
			}
			return nil, r.err
		}
		r.fill()
	}
}

// fill reads more of the stream into buf, keeping what is not consumed.
func (r *Reader) fill() {
	if r.off > 0 {
		n := copy(r.buf, r.buf[r.off:])
		r.buf, r.off = r.buf[:n], 0
	}
	if len(r.buf) == cap(r.buf) {
		r.buf = append(r.buf, make([]byte, max(4096, len(r.buf)))...)[:len(r.buf)]
	}
	n, err := r.r.Read(r.buf[len(r.buf):cap(r.buf)])
	r.buf = r.buf[:len(r.buf)+n]
	if err != nil {
		r.err = err
	}
}
