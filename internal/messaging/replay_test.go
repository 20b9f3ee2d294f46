package messaging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// randomHerdr answers Prompt with a random mix of success and herdr's
// refusals, from a seeded source so that a failure replays.
type randomHerdr struct {
	fakeHerdr
	rnd *rand.Rand
}

var promptOutcomes = []error{
	nil, nil, nil, nil,
	&PromptError{Verdict: NotSent, Status: StatusBlocked, Err: errors.New("agent_blocked")},
	&PromptError{Verdict: Uncertain, Err: errors.New("agent_prompt_stalled")},
	&PromptError{Verdict: Failed, Err: errors.New("agent_not_found")},
	fmt.Errorf("connection closed: %w", io.ErrUnexpectedEOF),
}

func (r *randomHerdr) Prompt(ctx context.Context, target, text string) error {
	r.mu.Lock()
	err := promptOutcomes[r.rnd.IntN(len(promptOutcomes))]
	r.mu.Unlock()
	r.fakeHerdr.Prompt(ctx, target, text)
	return err
}

// TestReplay_MatchesLiveStateUnderRandomTraffic drives a core with random
// calls and events, compacting often, and at every checkpoint opens a copy
// of its journal: the restored state must equal the live one.
func TestReplay_MatchesLiveStateUnderRandomTraffic(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomTraffic(t, seed) })
		})
	}
}

func randomTraffic(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 42))
	h := &randomHerdr{fakeHerdr: fakeHerdr{tails: map[string]string{"a": "tail a"}}, rnd: rand.New(rand.NewPCG(seed, 7))}
	dir := t.TempDir()
	live := newCore(t, dir, h, &Options{NewID: idsWithPrefix("x"), CompactBytes: 4096})
	workers := []string{"a", "b", "c"}
	seq := map[string]uint64{}
	statuses := []string{StatusIdle, StatusWorking, StatusDone, StatusBlocked, StatusIdle}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()

	for step := range 400 {
		w := workers[rnd.IntN(len(workers))]
		switch op := rnd.IntN(10); op {
		case 0, 1:
			seq[w]++
			live.ObserveStatus(w, statuses[rnd.IntN(len(statuses))], seq[w])
		case 2:
			live.Send(bg, SendRequest{From: "primary", To: w, Content: fmt.Sprintf("task %d", step), Timeout: time.Duration(rnd.IntN(120)+1) * time.Second})
		case 3:
			if turns := live.Status(w).OpenTurns; len(turns) > 0 {
				req := SendRequest{From: "primary", Content: fmt.Sprintf("more %d", step), TurnID: turns[rnd.IntN(len(turns))].ID,
					Wait: rnd.IntN(2) == 0, Timeout: time.Duration(rnd.IntN(60)+1) * time.Second}
				go live.Send(ctx, req)
			}
		case 4:
			live.Reply(bg, w, fmt.Sprintf("reply %d", step), rnd.IntN(3) > 0)
		case 5:
			go live.Ask(ctx, w, fmt.Sprintf("question %d", step), time.Duration(rnd.IntN(30)+1)*time.Second)
		case 6:
			msgs, _ := live.Poll(bg, "primary", false, 0)
			var ids []string
			for _, m := range msgs {
				if rnd.IntN(2) == 0 {
					ids = append(ids, m.ID)
				}
			}
			live.Ack("primary", ids)
		case 7:
			if rnd.IntN(4) == 0 {
				live.WorkerGone(w, "deleted")
			}
		default:
			time.Sleep(time.Duration(rnd.IntN(15)) * time.Second)
		}
		synctest.Wait()
		if step%20 == 19 {
			compareWithReplay(t, live, dir, step)
		}
	}
	cancel()
	synctest.Wait()
}

func compareWithReplay(t *testing.T, live *Core, dir string, step int) {
	t.Helper()
	copyDir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(copyDir, JournalFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	restored, err := New(copyDir, &fakeHerdr{}, &Options{NewID: idsWithPrefix("r")})
	if err != nil {
		t.Fatalf("step %d: reopen: %v", step, err)
	}
	defer restored.Close()
	ignore := cmpopts.IgnoreFields(TurnStatus{}, "Waiting", "Asking", "Question")
	if diff := cmp.Diff(durableView(live), durableView(restored), ignore, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("step %d: restored state differs from live state (-live +restored):\n%s", step, diff)
	}
}

// durableView is snapshotView without what is deliberately not durable:
// observations, gone flags (the reconciler reports them again) and the
// pickup wait.
func durableView(c *Core) view {
	v := view{Workers: map[string]WorkerStatus{}}
	for _, n := range []string{"a", "b", "c", "primary"} {
		s := c.Status(n)
		s.AgentStatus, s.StateChangeSeq, s.Delivering, s.Gone, s.GoneReason = "", 0, "", false, ""
		v.Workers[n] = s
	}
	v.Mail, _ = c.Poll(bg, "primary", false, 0)
	return v
}
