package messaging

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/journal"
)

// gate stalls one journal operation once armed: the operation announces it
// on entered and waits until release is closed.
type gate struct {
	armed            atomic.Bool
	entered, release chan struct{}
	opened           atomic.Bool
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

// stall is called by the gated operation.
func (g *gate) stall() {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
}

// open lets the stalled operation go on; it may be called more than once.
func (g *gate) open() {
	if g.opened.CompareAndSwap(false, true) {
		close(g.release)
	}
}

// syncGated stalls the journal's fsync at the gate.
type syncGated struct {
	journal.File
	g *gate
}

func (f *syncGated) Sync() error {
	f.g.stall()
	return f.File.Sync()
}

// writeGated stalls its first write at the gate, after writing half of
// it: on a rewrite's new file, the snapshot. (The file stays the journal
// after the rename, under the temporary name it was opened with; its later
// writes are appends and pass.)
type writeGated struct {
	journal.File
	g     *gate
	wrote bool
}

func (f *writeGated) Write(p []byte) (int, error) {
	first := !f.wrote
	f.wrote = true
	if first && f.g.armed.Load() {
		n, err := f.File.Write(p[:len(p)/2])
		if err != nil {
			return n, err
		}
		f.g.stall()
		m, err := f.File.Write(p[n:])
		return n + m, err
	}
	return f.File.Write(p)
}

func isCompactFile(f journal.File) bool {
	n, ok := f.(interface{ Name() string })
	return ok && strings.HasSuffix(n.Name(), ".compact")
}

// within fails t when f has not returned in a time no in-memory call
// needs; it never delays a passing test (f's return ends the wait).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return while the journal was stalled", what)
	}
}

// A call that only reads — a poll, a status, a pending count, the busy
// list — does not wait for another call's journal fsync, and does not see
// that call's change before it is durable.
func TestCore_ReadsDoNotWaitForAJournalFsync(t *testing.T) {
	g := newGate()
	c := newCore(t, t.TempDir(), &fakeHerdr{}, &Options{wrapJournal: func(f journal.File) journal.File {
		return &syncGated{File: f, g: g}
	}})
	t.Cleanup(g.open) // before Close
	if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "task"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reply(bg, "w", "one", false); err != nil {
		t.Fatal(err)
	}

	g.armed.Store(true)
	replied := call(func() (ReplyResult, error) { return c.Reply(bg, "w", "two", false) })
	within(t, "the reply's fsync", func() { <-g.entered })

	within(t, "reads during a pending fsync", func() {
		p, err := c.PollPage(bg, "primary", PollRequest{})
		if err != nil {
			t.Error(err)
		}
		if diff := cmp.Diff([]string{"one"}, contents(p.Messages)); diff != "" {
			t.Errorf("poll while the next reply is not yet durable (-want +got):\n%s", diff)
		}
		if n := c.Pending("primary"); n != 1 {
			t.Errorf("Pending = %d, want 1", n)
		}
		if s := c.Status("w"); s.QueueDepth != 1 || len(s.OpenTurns) != 1 {
			t.Errorf("Status = %+v, want the queued task and its turn", s)
		}
		if diff := cmp.Diff([]string{"w"}, c.Busy()); diff != "" {
			t.Errorf("Busy (-want +got):\n%s", diff)
		}
	})

	g.open()
	if r := <-replied; r.err != nil {
		t.Fatal(r.err)
	}
	p, _ := c.PollPage(bg, "primary", PollRequest{})
	if diff := cmp.Diff([]string{"one", "two"}, contents(p.Messages)); diff != "" {
		t.Fatalf("poll once the reply is durable (-want +got):\n%s", diff)
	}
}

// A compaction stalled in the middle of writing its new file blocks no
// call: the ack that started it returns, sends, replies and polls go on,
// and a crash at that instant, or after it, finds every acknowledged
// record, those committed during the compaction included.
func TestCore_StalledCompactionBlocksNoCall(t *testing.T) {
	dir := t.TempDir()
	c, g := newGatedCompactionCore(t, dir)
	if _, err := c.Reply(bg, "w", "keep me", false); err != nil {
		t.Fatal(err)
	}
	msgs, _ := c.Poll(bg, "primary", false, 0)
	var ids []string
	for _, m := range msgs[:100] {
		ids = append(ids, m.ID)
	}

	compacted(c) // the replies may have started one: stall the ack's own
	g.armed.Store(true)
	within(t, "the ack that starts a compaction", func() {
		if n, err := c.Ack("primary", ids); n != 100 || err != nil {
			t.Errorf("Ack = %d, %v", n, err)
		}
	})
	within(t, "the compaction's write", func() { <-g.entered })

	check := func(t *testing.T, c *Core) {
		t.Helper()
		p, err := c.PollPage(bg, "primary", PollRequest{})
		if err != nil {
			t.Error(err)
		}
		if diff := cmp.Diff([]string{"keep me", "replied during the compaction"}, contents(p.Messages)); diff != "" {
			t.Errorf("mailbox (-want +got):\n%s", diff)
		}
		if s := c.Status("w2"); s.QueueDepth != 1 || len(s.OpenTurns) != 1 {
			t.Errorf("Status(w2) = %+v, want the prompt sent during the compaction", s)
		}
	}
	within(t, "calls during a stalled compaction", func() {
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w2", Content: "sent during the compaction"}); err != nil {
			t.Error(err)
		}
		if _, err := c.Reply(bg, "w", "replied during the compaction", false); err != nil {
			t.Error(err)
		}
		check(t, c)
	})

	// A crash now: the journal on disk is the old file, with everything.
	crashed := t.TempDir()
	data, err := os.ReadFile(JournalPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, JournalFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	check(t, newCore(t, crashed, &fakeHerdr{}, &Options{NewID: idsWithPrefix("b")}))

	g.open()
	compacted(c)
	if after := journalSize(t, dir); after >= gatedCompactAt {
		t.Fatalf("journal is %d bytes after the compaction; want it below %d", after, gatedCompactAt)
	}
	crash(c)
	check(t, newCore(t, dir, &fakeHerdr{}, &Options{NewID: idsWithPrefix("c")}))
}

// A poll waiting on a mailbox that WorkerGone drops is woken only once the
// drop is durable and applied, so that it goes on waiting on the mailbox
// that replaces it and gets that one's mail.
func TestCore_PollOnADroppedMailboxGetsTheNextMail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate()
		c := newCore(t, t.TempDir(), &fakeHerdr{}, &Options{wrapJournal: func(f journal.File) journal.File {
			return &syncGated{File: f, g: g}
		}})
		t.Cleanup(g.open) // before Close
		// Worker a delegates to b, then waits for mail.
		if _, err := c.Send(bg, SendRequest{From: "a", To: "b", Content: "task"}); err != nil {
			t.Fatal(err)
		}
		c.ObserveStatus("b", StatusIdle, 1)
		synctest.Wait() // the task is typed into b's pane
		polled := call(func() (PollPage, error) {
			return c.PollPage(bg, "a", PollRequest{Wait: true, Timeout: minute})
		})
		pending(t, polled)

		// a is reported gone; the drop of its mailbox stalls at its fsync.
		g.armed.Store(true)
		gone := make(chan struct{})
		go func() {
			defer close(gone)
			c.WorkerGone("a", "paused")
		}()
		<-g.entered
		synctest.Wait()
		g.open()
		<-gone

		if _, err := c.Reply(bg, "b", "done", true); err != nil {
			t.Fatal(err)
		}
		p, err := got(t, polled)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"done"}, contents(p.Messages)); diff != "" {
			t.Fatalf("poll after its mailbox was dropped and mail came (-want +got):\n%s", diff)
		}
	})
}

// Acknowledgements that retire most of the journal while a compaction runs
// (its snapshot still holds that mail) start another once it ends.
func TestCore_AcksDuringACompactionCompactAgain(t *testing.T) {
	dir := t.TempDir()
	c, g := newGatedCompactionCore(t, dir)
	msgs, _ := c.Poll(bg, "primary", false, 0)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	compacted(c)
	g.armed.Store(true)
	c.lockW()
	c.compact() // its snapshot holds all 100 messages
	c.unlockW()
	within(t, "the compaction's write", func() { <-g.entered })
	if n, err := c.Ack("primary", ids); n != 100 || err != nil {
		t.Fatalf("Ack = %d, %v", n, err)
	}
	g.open()
	compacted(c)
	if after := journalSize(t, dir); after >= gatedCompactAt {
		t.Fatalf("journal is %d bytes once every message was acknowledged during a compaction; want it compacted again below %d", after, gatedCompactAt)
	}
	crash(c)
	if n := newCore(t, dir, &fakeHerdr{}, &Options{NewID: idsWithPrefix("b")}).Pending("primary"); n != 0 {
		t.Fatalf("after a restart the mailbox holds %d messages, want 0", n)
	}
}

// gatedCompactAt is the CompactBytes of newGatedCompactionCore's Core.
const gatedCompactAt = 64 << 10

// newGatedCompactionCore opens a Core in dir that compacts past gatedCompactAt
// and whose compaction writes wait on the returned gate once it is armed,
// and fills w's replies to the primary with 100 replies of 4 KiB, enough
// to start a compaction.
func newGatedCompactionCore(t *testing.T, dir string) (*Core, *gate) {
	t.Helper()
	g := newGate()
	c := newCore(t, dir, &fakeHerdr{}, &Options{CompactBytes: gatedCompactAt, wrapJournal: func(f journal.File) journal.File {
		if isCompactFile(f) {
			return &writeGated{File: f, g: g}
		}
		return f
	}})
	t.Cleanup(g.open) // before Close
	content := strings.Repeat("x", 4<<10)
	for range 100 {
		if _, err := c.Reply(bg, "w", content, false); err != nil {
			t.Fatal(err)
		}
	}
	return c, g
}
