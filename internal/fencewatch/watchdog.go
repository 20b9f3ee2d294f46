package fencewatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Watchdog is fleetd's handle on its watchdog process: [Watchdog.Arm]
// hands it a plan, [Watchdog.Close] ends it.
type Watchdog struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	exit chan struct{} // closed once the process has exited
	err  error         // its exit, once exit is closed

	mu   sync.Mutex
	next []byte // the newest plan's line, not taken by the writer yet
	// armed is the newest line Arm handed on — waiting in next, being
	// written, or written: the same plan again is not written twice
	// (comparing with the last line written missed a line in flight).
	armed  []byte
	kick   chan struct{} // (buffered) next was set
	closed bool
	wrote  chan struct{} // closed when the writer has ended
}

// Start runs the watchdog: argv is its command line (fleetd's own
// executable and `fence-watchdog` with its flags); its standard error is
// stderr, where it logs. It runs until [Watchdog.Close] or until it fails
// (Exited).
func Start(argv []string, stderr io.Writer) (*Watchdog, error) {
	if len(argv) == 0 {
		return nil, errors.New("fence watchdog: no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = nil, stderr
	// A group of its own: a terminal's Ctrl-Z stops fleetd's group, and
	// the watchdog must go on when fleetd is stopped.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("fence watchdog: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("fence watchdog: start %s: %w", argv[0], err)
	}
	w := &Watchdog{cmd: cmd, in: in, exit: make(chan struct{}), kick: make(chan struct{}, 1), wrote: make(chan struct{})}
	go func() {
		w.err = cmd.Wait()
		close(w.exit)
	}()
	go w.writer()
	return w, nil
}

// Arm hands the watchdog p, replacing the plan it has; it never blocks
// (a watchdog that does not read gets the newest plan once it does).
func (w *Watchdog) Arm(p Plan) {
	line, err := json.Marshal(p)
	if err != nil {
		return // a Plan always encodes
	}
	line = append(line, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || bytes.Equal(w.armed, line) {
		return // the watchdog has this plan, or is about to
	}
	w.next, w.armed = line, line
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// writer writes the newest plan whenever there is one, until Close.
func (w *Watchdog) writer() {
	defer close(w.wrote)
	for {
		select {
		case <-w.kick:
		case <-w.exit:
			return
		}
		w.mu.Lock()
		line, closed := w.next, w.closed
		w.next = nil
		w.mu.Unlock()
		if closed {
			return
		}
		if line == nil {
			continue
		}
		if _, err := w.in.Write(line); err != nil {
			return // the watchdog exited: Exited says so
		}
	}
}

// Exited returns a channel closed once the watchdog process has exited,
// and then its exit error.
func (w *Watchdog) Exited() (<-chan struct{}, func() error) {
	return w.exit, func() error { return w.err }
}

// Close ends the watchdog: its input ends, and it exits without acting.
// It waits for that up to grace, then kills it. Safe to call again.
func (w *Watchdog) Close(grace time.Duration) error {
	w.mu.Lock()
	was := w.closed
	w.closed = true
	w.mu.Unlock()
	if !was {
		w.in.Close() // a write under way fails: the writer ends
		select {
		case w.kick <- struct{}{}:
		default:
		}
		<-w.wrote
	}
	select {
	case <-w.exit:
	case <-time.After(grace):
		w.cmd.Process.Kill()
		<-w.exit
	}
	if w.err != nil && !was {
		return fmt.Errorf("fence watchdog: %w", w.err)
	}
	return nil
}
