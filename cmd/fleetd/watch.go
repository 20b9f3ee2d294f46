package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/labels"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// `fleetd get members -w` reads the running fleetd's member watch stream
// (GET /members?watch=1, server-sent events; see package mcp): it prints
// the members as a table once the stream's initial state is in, then one
// line per change, until fleetd ends the stream. Nothing polls.

const (
	// watchIdle ends a watch that heard nothing, not even a heartbeat
	// (fleetd sends one every 15s), for this long: the connection is dead.
	watchIdle = time.Minute
	// maxWatchEvent bounds one event of the stream.
	maxWatchEvent = 4 << 20
)

// watchSpec is what one watch prints.
type watchSpec struct {
	name   string // only this member; empty: every member
	sel    labels.Selector
	sortBy string
	format outputFormat
	events bool // print each line's event type first
}

// openStream starts GET path as an event stream, read as it arrives (no
// overall timeout: the stream lasts as long as ctx). A non-2xx answer is an
// *httpError, as from do. Both `get -w` and `logs -f` use it.
func (c *apiClient) openStream(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	// The stream is long-lived: no overall timeout, only the idle one.
	hc := &http.Client{Transport: c.http.Transport}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach fleetd at %s (is `fleetd serve` running?): %w", c.base, errors.Unwrap(err))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, responseError(resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("fleetd at %s answered %s with %s, not an event stream: it is older than this client; upgrade it", c.base, path, termtext.Line(ct))
	}
	return resp, nil
}

// watchMembers prints the members and then their changes to w until the
// stream ends (an error: fleetd stopped or dropped the watch) or ctx does
// (nil).
func watchMembers(ctx context.Context, c *apiClient, spec watchSpec, w io.Writer, now func() time.Time) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	resp, err := c.openStream(ctx, "/members?watch=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	errIdle := fmt.Errorf("the watch heard nothing from fleetd at %s for %s, not even a heartbeat", c.base, watchIdle)
	idle := time.AfterFunc(watchIdle, func() { cancel(errIdle) })
	defer idle.Stop()

	p := &watchPrinter{spec: spec, w: w, now: now, shown: map[string]bool{}}
	// Any bytes, a heartbeat comment included, prove the stream alive.
	body := readFunc(func(b []byte) (int, error) {
		n, err := resp.Body.Read(b)
		if n > 0 {
			idle.Reset(watchIdle)
		}
		return n, err
	})
	var eventErr error // from the stream's content or the printer, not the connection
	err = readEvents(body, maxWatchEvent, func(_ string, data []byte) (bool, error) {
		if data == nil {
			return true, nil
		}
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			eventErr = fmt.Errorf("watch stream from %s: bad event: %w", c.base, err)
		} else {
			eventErr = p.event(ev.Type, ev.Object)
		}
		return eventErr == nil, eventErr
	})
	if eventErr != nil {
		return eventErr
	}
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		return cause
	}
	if ctx.Err() != nil {
		return nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("watch stream from %s: %w", c.base, err)
	}
	return fmt.Errorf("fleetd at %s ended the watch stream (it is shutting down?)", c.base)
}

// readFunc is an io.Reader made of a function.
type readFunc func([]byte) (int, error)

func (f readFunc) Read(b []byte) (int, error) { return f(b) }

// watchPrinter turns stream events into lines.
type watchPrinter struct {
	spec    watchSpec
	w       io.Writer
	now     func() time.Time
	synced  bool
	initial []v1alpha1.Member
	shown   map[string]bool // members whose last line said they match
	widths  []int           // the table's column widths
}

func (p *watchPrinter) event(typ string, raw json.RawMessage) error {
	switch typ {
	case mcp.WatchError:
		var e mcp.APIError
		_ = json.Unmarshal(raw, &e)
		return fmt.Errorf("fleetd ended the watch: %s (%s)", termtext.Line(e.Error.Message), termtext.Line(e.Error.Code))
	case mcp.WatchSynced:
		p.synced = true
		return p.printInitial()
	case mcp.WatchAdded, mcp.WatchModified, mcp.WatchDeleted:
	default:
		return nil // a later fleetd's event: not ours to print
	}
	var m v1alpha1.Member
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("watch stream: bad member: %w", err)
	}
	match := typ != mcp.WatchDeleted && p.matches(&m)
	if !p.synced {
		if match {
			p.initial = append(p.initial, m)
		}
		return nil
	}
	was := p.shown[m.Name]
	switch {
	case match && !was:
		typ = mcp.WatchAdded
	case match:
		typ = mcp.WatchModified
	case was:
		// Deleted, or no longer selected: gone from this watch.
		typ = mcp.WatchDeleted
	default:
		return nil
	}
	if match {
		p.shown[m.Name] = true
	} else {
		delete(p.shown, m.Name)
	}
	return p.print(typ, &m)
}

func (p *watchPrinter) matches(m *v1alpha1.Member) bool {
	return (p.spec.name == "" || m.Name == p.spec.name) && p.spec.sel.Matches(m.Labels)
}

// printInitial prints the state the stream opened with: a table (its
// widths are kept for the change lines), or one object at a time.
func (p *watchPrinter) printInitial() error {
	if err := sortBy(p.initial, p.spec.sortBy); err != nil {
		return err
	}
	f := p.spec.format
	if f.name == "" || f.name == "wide" {
		if len(p.initial) == 0 && !p.spec.events {
			p.widths = columnWidths([][]string{memberHeader(f.name == "wide")})
			return nil
		}
		rows := [][]string{p.header()}
		for i := range p.initial {
			rows = append(rows, p.row(mcp.WatchAdded, &p.initial[i]))
		}
		p.widths = columnWidths(rows)
		for _, r := range rows {
			if err := p.writeRow(r); err != nil {
				return err
			}
		}
	} else {
		for i := range p.initial {
			if err := p.print(mcp.WatchAdded, &p.initial[i]); err != nil {
				return err
			}
		}
	}
	for _, m := range p.initial {
		p.shown[m.Name] = true
	}
	p.initial = nil
	return nil
}

func (p *watchPrinter) header() []string {
	h := memberHeader(p.spec.format.name == "wide")
	if p.spec.events {
		h = append([]string{"EVENT"}, h...)
	}
	return h
}

func (p *watchPrinter) row(typ string, m *v1alpha1.Member) []string {
	r := memberRow(m, p.spec.format.name == "wide", p.now())
	if p.spec.events {
		r = append([]string{typ}, r...)
	}
	for i, c := range r {
		r[i] = termtext.Line(c)
	}
	return r
}

func (p *watchPrinter) print(typ string, m *v1alpha1.Member) error {
	f := p.spec.format
	if f.name == "" || f.name == "wide" {
		if len(p.widths) == 0 || len(p.widths) != len(p.header()) {
			p.widths = columnWidths([][]string{p.header()})
		}
		return p.writeRow(p.row(typ, m))
	}
	if p.spec.events && f.name == "name" {
		_, err := fmt.Fprintf(p.w, "%s %s\n", typ, memberResource.nameOf(m.Name))
		return err
	}
	return p.printObject(m)
}

var memberResource, _ = lookupResource("members")

// printObject prints one member in a non-table format: JSON objects one
// after another, YAML documents separated by ---, a template per member.
func (p *watchPrinter) printObject(m *v1alpha1.Member) error {
	f := p.spec.format
	m.APIVersion, m.Kind = v1alpha1.GroupVersion, v1alpha1.KindMember
	switch {
	case f.name == "name":
		_, err := fmt.Fprintln(p.w, memberResource.nameOf(m.Name))
		return err
	case f.templated():
		return f.executeTemplate(p.w, m)
	case f.name == "yaml":
		if _, err := io.WriteString(p.w, "---\n"); err != nil {
			return err
		}
	}
	return writeStructured(p.w, m, f.name)
}

// writeRow writes cells padded to the table's widths, three spaces apart
// like the tabwriter of a plain get; a wider cell pushes the rest right.
func (p *watchPrinter) writeRow(cells []string) error {
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i == len(cells)-1 {
			break
		}
		pad := 3
		if i < len(p.widths) {
			pad += p.widths[i] - len([]rune(c))
		}
		b.WriteString(strings.Repeat(" ", max(pad, 1)))
	}
	b.WriteByte('\n')
	_, err := io.WriteString(p.w, b.String())
	return err
}

// watchMinWidths are the widths a column of the watch table starts with,
// so that a later phase or agent status lines up too.
var watchMinWidths = map[string]int{"EVENT": len("MODIFIED"), "PHASE": len(v1alpha1.PhaseTerminating), "AGENT": len("working")}

func columnWidths(rows [][]string) []int {
	var w []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(w) {
				w = append(w, watchMinWidths[c])
			}
			w[i] = max(w[i], len([]rune(c)))
		}
	}
	return w
}
