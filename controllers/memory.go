package controllers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// memory is what the controller keeps of a member across its panes and
// across fleetd's restarts, where a pane's ownership record (dropped with
// the pane) and the in-memory runtime (lost with the process) cannot keep
// it: the agent's own session, so that any relaunch resumes it, and a wait
// for idle under way — a graceful close or a replacement — with its
// deadline and whether it was forced, so that a restart in the middle
// keeps both. A deleted member is gone from the desired state; its
// memory is all that still says how long its tab may stay open.
type memory struct {
	// UID is the member object the memory is of: a member deleted and
	// declared again under its name is another member, and resumes
	// nothing of the first.
	UID string `json:"uid,omitempty"`
	// Session is the agent's own session as herdr last reported it
	// (agent_session); the next launch resumes it (resume.go).
	Session *v1alpha1.AgentSession `json:"session,omitempty"`
	// Close is the graceful close of the member's tab under way (it was
	// deleted, stopped or paused), nil when none.
	Close *closing `json:"close,omitempty"`
	// Update is the replacement of the running agent by the member's
	// current definition, or a restart, waiting for the agent to be
	// idle; nil when none.
	Update *updating `json:"update,omitempty"`
	// Replaced is a replacement by a Profile's rollout whose new agent is
	// not Ready yet (rollout.go): it holds its turn until it is, and stops
	// the rollout if it fails first. nil when none.
	Replaced *replaced `json:"replaced,omitempty"`
}

// replaced is a member's agent replaced by its profile's rollout, the new
// one not Ready yet (rollout.go).
type replaced struct {
	Profile string `json:"profile"`
	// Target is the rollout's target the new agent runs
	// (rollout.Target): a failure stops only that rollout.
	Target string    `json:"target"`
	Since  time.Time `json:"since"`
}

// closing is a graceful close of a member's tab (graceful.go).
type closing struct {
	// Reason is the Options.OnPaneGone reason it closes for: deleted or
	// paused.
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
	// Force: close now, whatever the agent is doing (Manager.Expedite).
	Force bool `json:"force,omitempty"`
	// Member is the member as it was last declared, without status, so
	// that a deleted member is listed (Terminating) until its tab is
	// closed, after a restart of fleetd too.
	Member *v1alpha1.Member `json:"member,omitempty"`
}

// updating is a replacement of a member's running agent waiting for idle
// (graceful.go).
type updating struct {
	// Generation is the definition the replacement runs; 0 for a restart
	// of the current one (Restart).
	Generation int64     `json:"generation,omitempty"`
	Restart    bool      `json:"restart,omitempty"`
	Since      time.Time `json:"since"`
	// Deadline is when the replacement goes ahead whatever the agent is
	// doing (spec.updateStrategy.maxWait); zero waits for idle forever.
	Deadline time.Time `json:"deadline,omitzero"`
	// Force: replace now (Manager.Expedite, Manager.Restart with now).
	Force bool `json:"force,omitempty"`
	// Rollout is the Profile whose rollout gave the replacement its turn
	// (rollout.go); "" for the member's own update or a restart.
	Rollout string `json:"rollout,omitempty"`
}

// memoryBook holds every member's memory, mirrored on disk: one file per
// member in the state directory's members/, replaced atomically and only
// when it changes. It is the one place the controllers keep durable
// per-member data besides the ownership records, so that moving it into
// another store is a change of this file alone.
type memoryBook struct {
	state statedir.Layout
	disk  bool // false keeps it in memory only

	mu   sync.Mutex
	mems map[string]memory
}

// loadMemory reads every member's memory from stateDir ("" keeps it in
// memory only).
func loadMemory(stateDir string) (*memoryBook, error) {
	b := &memoryBook{mems: map[string]memory{}}
	if stateDir == "" {
		return b, nil
	}
	b.state, b.disk = statedir.At(stateDir), true
	dir := b.state.MemoryDir()
	entries, err := recordDir(dir, "member memory")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if e.IsDir() || !ok || !v1alpha1.IsMemberName(name) {
			continue // a temporary file of an interrupted write, or not ours
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("member memory: %w", err)
		}
		var m memory
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("member memory %s is corrupt (%v); move it away to let fleetd start (the member's agent then starts afresh)", path, err)
		}
		b.mems[name] = m
	}
	return b, nil
}

// get returns member name's memory (the zero memory if none). Its
// pointers are shared: change a copy (see edit) and put it.
func (b *memoryBook) get(name string) memory {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mems[name]
}

// edit applies change to a copy of member name's memory and stores it,
// writing its file only when it changed.
func (b *memoryBook) edit(name string, change func(*memory)) error {
	b.mu.Lock()
	old := b.mems[name]
	b.mu.Unlock()
	m := old.clone()
	change(&m)
	if reflect.DeepEqual(old, m) {
		return nil
	}
	if b.disk {
		var err error
		if m.isZero() {
			err = os.Remove(b.state.Memory(name))
			if errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		} else {
			var data []byte
			if data, err = json.MarshalIndent(m, "", "  "); err == nil {
				err = atomicfile.Write(b.state.Memory(name), append(data, '\n'), statedir.FileMode)
			}
		}
		if err != nil {
			return fmt.Errorf("write the memory of member %q: %w", name, err)
		}
	}
	b.mu.Lock()
	if m.isZero() {
		delete(b.mems, name)
	} else {
		b.mems[name] = m
	}
	b.mu.Unlock()
	return nil
}

// forget drops member name's memory: the member is deleted and its tab
// closed.
func (b *memoryBook) forget(name string) error {
	return b.edit(name, func(m *memory) { *m = memory{} })
}

func (m memory) isZero() bool {
	return m.Session == nil && m.Close == nil && m.Update == nil && m.Replaced == nil
}

// clone copies m deeply enough for edit: every pointer it holds.
func (m memory) clone() memory {
	out := m
	out.Session = m.Session.DeepCopy()
	if m.Close != nil {
		c := *m.Close
		c.Member = m.Close.Member.DeepCopy()
		out.Close = &c
	}
	if m.Update != nil {
		u := *m.Update
		out.Update = &u
	}
	if m.Replaced != nil {
		r := *m.Replaced
		out.Replaced = &r
	}
	return out
}
