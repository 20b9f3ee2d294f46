package fencewatch

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// The test binary is the watchdog process of these tests: with
// FENCEWATCH_TEST_CHILD=copy it copies its input to the file
// FENCEWATCH_TEST_OUT and exits when it ends; with =deaf it reads nothing
// and never exits on its own.
func TestMain(m *testing.M) {
	switch os.Getenv("FENCEWATCH_TEST_CHILD") {
	case "copy":
		out, err := os.Create(os.Getenv("FENCEWATCH_TEST_OUT"))
		if err != nil {
			os.Exit(3)
		}
		io.Copy(out, os.Stdin)
		out.Close()
		os.Exit(0)
	case "deaf":
		select {}
	}
	os.Exit(m.Run())
}

func TestWatchdog_WritesTheNewestPlanAndEndsWithClose(t *testing.T) {
	out := t.TempDir() + "/plans"
	t.Setenv("FENCEWATCH_TEST_CHILD", "copy")
	t.Setenv("FENCEWATCH_TEST_OUT", out)
	w, err := Start([]string{os.Args[0]}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	plan := func(at int64) Plan { return Plan{FireAt: at, Policy: Close, Prefix: "fleetd/"} }
	for at := range int64(50) {
		w.Arm(plan(at))
		w.Arm(plan(at)) // the same plan again: not written twice
	}
	// The watchdog gets the newest plan: wait for it.
	read := func() (last int64) {
		b, err := os.ReadFile(out)
		if err != nil {
			return -1
		}
		last = -1
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			var p Plan
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				t.Fatalf("the watchdog read %q: %v", sc.Text(), err)
			}
			if p.FireAt <= last {
				t.Fatalf("plan %d written after plan %d: want each once, newer ones after", p.FireAt, last)
			}
			last = p.FireAt
		}
		return last
	}
	for deadline := time.Now().Add(30 * time.Second); read() != 49; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the newest plan the watchdog read is %d; want 49", read())
		}
	}
	if err := w.Close(10 * time.Second); err != nil {
		t.Fatalf("Close = %v", err)
	}
	exited, _ := w.Exited()
	select {
	case <-exited:
	default:
		t.Error("the watchdog still runs after Close")
	}
}

// A watchdog that does not read never blocks Arm; Close kills one that
// does not exit.
func TestWatchdog_ArmNeverBlocksOnAWatchdogThatDoesNotRead(t *testing.T) {
	t.Setenv("FENCEWATCH_TEST_CHILD", "deaf")
	w, err := Start([]string{os.Args[0]}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	keep := make([]string, 1000) // 1000 names a plan: far more than a pipe holds, in all
	for i := range keep {
		keep[i] = fmt.Sprintf("member-%04d-%s", i, strings.Repeat("x", 40))
	}
	armed := make(chan struct{})
	go func() {
		defer close(armed)
		for at := range int64(100) {
			w.Arm(Plan{FireAt: at, Policy: Close, Prefix: "fleetd/", Keep: keep})
		}
	}()
	select {
	case <-armed:
	case <-time.After(30 * time.Second):
		t.Fatal("Arm blocked on a watchdog that does not read")
	}
	if err := w.Close(100 * time.Millisecond); err == nil {
		t.Error("Close of a watchdog it had to kill = nil; want its exit error")
	}
	exited, _ := w.Exited()
	select {
	case <-exited:
	default:
		t.Error("the watchdog still runs after Close")
	}
}
