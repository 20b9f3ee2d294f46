package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
)

// Issue 21: agents are not pods. The schedule changes the members' Profile
// in the middle of their turns (actProfile), which rolls out to them — each
// agent replaced at its next idle moment — and two invariants are checked:
//
//   - no agent is closed while it works: every tab.close fleetd sends
//     (closeWatch sees each before herdr serves it) finds no agent in the
//     tab working or blocked at a dialog, and none on a prompt its worker
//     has not finished. The schedule forces nothing and sets no grace
//     period or maxWait short enough to end a wait;
//   - every turn open when the profile changed ends with the worker's
//     answer — its reply, or turn_done with its screen — never with
//     worker_gone or delivery_failed, unless the schedule itself took the
//     worker's agent away (a killed pane, an exited agent, a crash, herdr
//     restarted with its agents dying) meanwhile.

// profileSpec is the chaos profile with the args of its nth version and,
// for every third, two members replaced at a time.
func profileSpec(n int) string {
	s := strings.Replace(profileYAML, `args: ["-m", "sim"]`, fmt.Sprintf(`args: ["-m", "sim-%d"]`, n), 1)
	if n%3 == 2 {
		s += "  rollout: {maxUnavailable: 2}\n"
	}
	return s
}

// actProfile changes the members' Profile (their agents' args), noting the
// turns its workers are in the middle of — their prompt typed and not
// finished — as ones that must end with the worker's answer.
func (w *world) actProfile(*rand.Rand) string {
	w.nextProfile++
	w.writeFile("profile.yaml", profileSpec(w.nextProfile))
	w.mu.Lock()
	defer w.mu.Unlock()
	var open []string
	for _, p := range w.pending {
		if s := w.byText[p.text]; s != nil && len(s.outcomes) == 0 && !w.lostTurns[s.turn] {
			w.midTurn[s.turn] = true
			open = append(open, s.turn)
		}
	}
	sort.Strings(open)
	return fmt.Sprintf("profile sim version %d (args -m sim-%d) in the middle of turns %v", w.nextProfile, w.nextProfile, open)
}

// lostAgent notes that the schedule took worker's agent away: its turns
// open since a profile change may end with worker_gone, and a later
// profile change is not in their middle (their prompts stay pending until
// the worker finds its pane gone).
func (w *world) lostAgent(worker string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, s := range w.ledger {
		if s.worker == worker {
			delete(w.midTurn, id)
			w.lostTurns[id] = true
		}
	}
}

// lostAgents notes that every agent was taken away (herdr restarted with
// its agents dying).
func (w *world) lostAgents() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.midTurn)
	for id := range w.ledger {
		w.lostTurns[id] = true
	}
}

// checkMidTurns reports every turn open at a profile change that ended
// otherwise than with the worker's answer. w.mu is held.
func (w *world) checkMidTurns() {
	var turns []string
	for id := range w.midTurn {
		turns = append(turns, id)
	}
	sort.Strings(turns)
	for _, id := range turns {
		s := w.ledger[id]
		for _, o := range s.outcomes {
			if strings.HasSuffix(o, "worker_gone") || strings.HasSuffix(o, "delivery_failed") {
				w.t.Errorf("turn %s (%s to %s) was open when the profile changed and ended with %s: the rollout took the agent away mid-turn", id, s.text, s.worker, o)
			}
		}
	}
}

// closeWatch is the fake herdr's request validator (herdr's schema, then
// a look at every tab.close): a tab fleetd closes must hold no agent that
// works, waits at a dialog or has a prompt its worker has not finished.
type closeWatch struct {
	herdrsim.Validator
	w *world
}

// ForProtocol binds the schema to the fake's protocol, as herdrsim.Start
// asks of a ProtocolValidator.
func (c closeWatch) ForProtocol(protocol int) herdrsim.Validator {
	if pv, ok := c.Validator.(herdrsim.ProtocolValidator); ok {
		return closeWatch{Validator: pv.ForProtocol(protocol), w: c.w}
	}
	return c
}

func (c closeWatch) Request(line []byte) error {
	if err := c.Validator.Request(line); err != nil {
		return err
	}
	var req struct {
		Method string `json:"method"`
		Params struct {
			TabID string `json:"tab_id"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &req) == nil && req.Method == "tab.close" {
		c.w.checkClose(req.Params.TabID)
	}
	return nil
}

// checkClose records a problem when tab holds a busy agent.
func (w *world) checkClose(tab string) {
	busy := map[string]string{}
	w.mu.Lock()
	for _, p := range w.pending {
		if !p.done { // a finished prompt's worker is going idle
			busy[p.pane] = p.text
		}
	}
	w.mu.Unlock()
	for _, p := range w.fake.Panes() {
		if p.TabID != tab || p.AgentName == "" {
			continue
		}
		switch {
		case p.Status == "working" || p.Status == "blocked":
			w.problem("fleetd closed tab %s while %s's agent in %s was %s", tab, p.AgentName, p.ID, p.Status)
		case busy[p.ID] != "":
			w.problem("fleetd closed tab %s while %s's agent in %s was on %s", tab, p.AgentName, p.ID, busy[p.ID])
		}
	}
}
