package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// normalized is data as a reader gives it back: every line terminator LF.
func normalized(data []byte) []byte {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	return []byte(strings.ReplaceAll(s, "\r", "\n"))
}

func encodeAll(t testing.TB, evs []Event) []byte {
	t.Helper()
	var b []byte
	for _, ev := range evs {
		var err error
		if b, err = Append(b, ev); err != nil {
			t.Fatalf("Append(%+v): %v", ev, err)
		}
	}
	return b
}

func readAll(t testing.TB, r io.Reader, max int) []Event {
	t.Helper()
	rd := NewReader(r, max)
	var out []Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, ev)
	}
}

func TestAppend_HostileDataCannotEndTheEventOrForgeOne(t *testing.T) {
	hostile := []string{
		"reply\r\r",
		"a\r\revent: gone\r\rdata: x",
		"a\n\nevent: gone\ndata: x\n\n",
		"a\r\n\r\nid: 7\r\n",
		"\r",
		"\n",
		"",
		"nul\x00 and \xff invalid utf-8",
	}
	for _, text := range hostile {
		evs := []Event{{Name: "update", Data: []byte(text)}, {Name: "next", Data: []byte("ok")}}
		got := readAll(t, bytes.NewReader(encodeAll(t, evs)), 1<<20)
		want := []Event{{Name: "update", Data: normalized([]byte(text))}, {Name: "next", Data: []byte("ok")}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("data %q: events read back differ (-want +got):\n%s", text, diff)
		}
	}
}

func TestAppend_RefusesFieldsThatCannotBeFramed(t *testing.T) {
	for _, ev := range []Event{{Name: "a\rb"}, {Name: "a\nb"}, {ID: "1\r"}, {ID: "1\x00"}} {
		if _, err := Append(nil, ev); !errors.Is(err, ErrInvalid) {
			t.Errorf("Append(%+v) = %v; want ErrInvalid", ev, err)
		}
	}
	if _, err := AppendComment(nil, "beat\r"); !errors.Is(err, ErrInvalid) {
		t.Errorf("AppendComment with CR = %v; want ErrInvalid", err)
	}
}

func TestReader_FollowsTheFormat(t *testing.T) {
	stream := "\xef\xbb\xbf: a comment\r\n" +
		"event: first\rdata: one\rdata:two\r\r" + // CR line ends; no space after the colon
		"retry: 10\nunknown: x\nid: 5\ndata\n\n" + // a "data" line without a colon is an empty data line
		"event: nodata\n\n" + // no data: not dispatched, and its type does not leak
		"data: third\r\n\r\n" +
		"id: bad\x00id\ndata: keeps-the-last-id\n\n" +
		"data: cut off by the end"
	want := []Event{
		{Name: "first", Data: []byte("one\ntwo")},
		{ID: "5", Data: []byte("")},
		{ID: "5", Data: []byte("third")},
		{ID: "5", Data: []byte("keeps-the-last-id")}, // an id with NUL is ignored
	}
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(stream),
		"one byte": iotest.OneByteReader(strings.NewReader(stream)),
	} {
		if diff := cmp.Diff(want, readAll(t, r, 1<<10)); diff != "" {
			t.Errorf("%s: events differ (-want +got):\n%s", name, diff)
		}
	}
}

func TestReader_BoundsAnEvent(t *testing.T) {
	big := encodeAll(t, []Event{{Data: bytes.Repeat([]byte("x"), 100)}})
	rd := NewReader(iotest.HalfReader(bytes.NewReader(big)), 64)
	if _, err := rd.Next(); !errors.Is(err, ErrTooLong) || !strings.Contains(err.Error(), "64 bytes") {
		t.Fatalf("Next = %v; want ErrTooLong naming the limit", err)
	}
	// Many short lines add up too.
	var lines []byte
	for range 20 {
		lines = append(lines, "data: xxxxxxxx\n"...)
	}
	rd = NewReader(bytes.NewReader(append(lines, '\n')), 64)
	if _, err := rd.Next(); !errors.Is(err, ErrTooLong) {
		t.Fatalf("Next of an event of many lines = %v; want ErrTooLong", err)
	}
	// Within the limit is fine, and the reader goes on after it.
	two := encodeAll(t, []Event{{Data: []byte("a")}, {Data: []byte("b")}})
	if got := readAll(t, bytes.NewReader(two), 16); len(got) != 2 {
		t.Fatalf("read %d events; want 2", len(got))
	}
}

func TestReader_PassesOnTheStreamsError(t *testing.T) {
	boom := errors.New("boom")
	rd := NewReader(io.MultiReader(strings.NewReader("data: x\n"), iotest.ErrReader(boom)), 64)
	if _, err := rd.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next = %v; want the stream's error", err)
	}
}

func TestWriter_StartsTheStreamAndFlushesEachEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	w, err := Start(rec)
	if err != nil {
		t.Fatal(err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if !rec.Flushed {
		t.Fatal("Start did not flush")
	}
	if err := w.Send(Event{Name: "update", Data: []byte("a\rb")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment("heartbeat"); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Body.String(), "event: update\ndata: a\ndata: b\n\n: heartbeat\n\n"; got != want {
		t.Fatalf("body %q; want %q", got, want)
	}
}

// FuzzRoundTrip: whatever the text (CR, LF, NUL, invalid UTF-8), events
// read back are the events written, their data with every line terminator
// read as LF, however the stream is cut into reads.
func FuzzRoundTrip(f *testing.F) {
	f.Add("update", "7", []byte("reply\r\r"), []byte("next"))
	f.Add("", "", []byte("a\r\n\r\nb"), []byte("\x00\xff\xfe"))
	f.Add("x", "", []byte(""), []byte("\n"))
	f.Fuzz(func(t *testing.T, name, id string, a, b []byte) {
		evs := []Event{{Name: name, ID: id, Data: a}, {Name: "second", Data: b}}
		frames, err := Append(nil, evs[0])
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.ContainsAny(name+id, "\r\n\x00") {
				t.Fatalf("Append refused %q %q: %v", name, id, err)
			}
			return
		}
		frames, _ = Append(frames, evs[1])
		want := []Event{{Name: name, ID: id, Data: normalized(a)}, {Name: "second", ID: id, Data: normalized(b)}}
		for _, r := range []io.Reader{bytes.NewReader(frames), iotest.OneByteReader(bytes.NewReader(frames))} {
			got := readAll(t, r, len(frames)+1)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("round trip differs (-want +got):\n%s", diff)
			}
		}
	})
}
