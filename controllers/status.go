package controllers

import (
	"crypto/sha1"
	"encoding/hex"
	"reflect"
	"slices"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/sortedindex"
)

// memberState is what the controller keeps about a member besides its
// spec: the state readers see — its status and events — and its restart
// bookkeeping (rt), one entry of Manager.states either way.
type memberState struct {
	name     string
	status   v1alpha1.MemberStatus
	events   []memberEvent // oldest first
	awaiting bool          // counted in fleetd_members_awaiting_input
	// shown: a status was written or an event recorded for the member,
	// which readers see from then on. An entry made for its runtime only
	// shows nothing (stateLocked): its status reads as Pending, as that
	// of a member with no entry.
	shown bool
	// object is the member as its status was last written for it. Once
	// the member is deleted from the desired state it is listed from here
	// (Terminating while its tab closes) until the controller forgets it.
	object *v1alpha1.Member
	rt     runtime
}

// memberEvent is one of a member's recent events (v1alpha1.Event) as its
// state keeps it, in 48 B rather than 80: its time in Unix nanoseconds (an
// event's time is in UTC), its type as whether it is a warning (fleetd's
// events are Normal or Warning).
type memberEvent struct {
	at              int64
	count           int32
	warning         bool
	reason, message string
}

// event returns e as the API shows it.
func (e *memberEvent) event() v1alpha1.Event {
	typ := v1alpha1.EventNormal
	if e.warning {
		typ = v1alpha1.EventWarning
	}
	return v1alpha1.Event{Time: time.Unix(0, e.at).UTC(), Type: typ, Reason: e.reason, Message: e.message, Count: e.count}
}

// newMemberStates returns an empty index of members' states by name.
func newMemberStates() sortedindex.Index[memberState] {
	return sortedindex.New(func(s *memberState) string { return s.name }, nil)
}

// stateLocked returns the state readers see of member name, nil if it
// has none (see memberState.shown). mu held.
func (m *Manager) stateLocked(name string) *memberState {
	if s := m.states.Get(name); s != nil && s.shown {
		return s
	}
	return nil
}

// entryLocked returns member name's entry, made if it has none. mu held.
func (m *Manager) entryLocked(name string) *memberState {
	s := m.states.Get(name)
	if s == nil {
		s = &memberState{name: name}
		m.states.Put(s)
	}
	return s
}

// launchMemo is launchHash(of). A snapshot never changes an object it
// holds — a changed definition is a new object — so the digest of the
// same object is the same.
type launchMemo struct {
	of   *v1alpha1.Member
	hash string
}

// awaitingInput reports whether a status shows an agent waiting at a
// dialog for a person.
func awaitingInput(st v1alpha1.MemberStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c.Reason == v1alpha1.ReasonAwaitingInput
		}
	}
	return false
}

// runtime is the in-memory restart bookkeeping of one member.
type runtime struct {
	// start is the agent start under way in the recorded pane, from
	// tab.create until herdr reports the agent ready; nil otherwise.
	start *starting
	// launch is the launchHash of the member's current definition
	// (launchHashOf, under mu: a member is counted in /metrics before it
	// is reconciled, and on any node).
	launch launchMemo
	// rare is the rest, which a member has only while something out of
	// the ordinary lasts — failures in a row, a resumed session, a
	// restore, a fence pause: nil while nothing does (settle), so that a
	// fleet of members whose agents run keeps none of it. Read it with
	// peek, change it with edit.
	rare *rareRuntime
}

// reset forgets the member's restart bookkeeping, for a pane closed on
// purpose (a pause, a replacement, the fence). The launch digest stays:
// it is of the definition, not of the pane, and launchHashOf keeps it
// under mu, which a reconcile does not hold here.
func (rt *runtime) reset() { rt.start, rt.rare = nil, nil }

// rareRuntime is the part of a member's runtime that is zero while its
// agent runs as it should.
type rareRuntime struct {
	failures    int       // consecutive failures since the agent last ran stably
	nextAttempt time.Time // no new pane before this; zero once failures is
	// failedGen and failedProfile: this member generation with this profile
	// object failed for good (restartPolicy Never, or a spec herdr cannot
	// launch); it stays Failed until either changes.
	failedGen     int64
	failedProfile *v1alpha1.Profile
	lastError     string // the last of the failures in a row
	// resumed is the session the current pane's launch resumed (nil: a
	// fresh start), at resumedAt (zero with it; resume.go); the session
	// itself is in the member's memory (memory.go).
	resumed   *v1alpha1.AgentSession
	resumedAt time.Time
	// resumeProof is how far the resumed agent got with its session
	// (resume.go): nil until it was ready; proven once it finished a turn.
	resumeProof *resumeProof
	// restoring: since when the recorded pane, restored by herdr after a
	// restart, waits for herdr to relaunch its agent.
	restoring time.Time
	// fencePaused is the pane whose agent the fence interrupted
	// (FencePause), until the node is confirmed again.
	fencePaused string
}

// peek returns rt's rare part to read: a copy, the zero one while rt has
// none.
func (rt *runtime) peek() rareRuntime {
	if rt.rare == nil {
		return rareRuntime{}
	}
	return *rt.rare
}

// edit returns rt's rare part to change, made if rt has none.
func (rt *runtime) edit() *rareRuntime {
	if rt.rare == nil {
		rt.rare = &rareRuntime{}
	}
	return rt.rare
}

// settle drops rt's rare part once nothing in it is set: the last step
// of a member's reconcile.
func (rt *runtime) settle() {
	if rt.rare != nil && *rt.rare == (rareRuntime{}) {
		rt.rare = nil
	}
}

// sessionID derives the member's stable session UUID from its uid: the same
// member (same uid) always has the same session id, across restarts. Every
// reconcile asks for it, so it is written into a buffer of its own, one
// allocation, not formatted.
func sessionID(uid string) string {
	if uid == "" {
		return ""
	}
	var in [64]byte
	h := sha1.Sum(append(append(in[:0], "fleetd-session:"...), uid...))
	h[6] = h[6]&0x0f | 0x50 // version 5 layout
	h[8] = h[8]&0x3f | 0x80
	var out [36]byte // 8-4-4-4-12 hex digits
	hex.Encode(out[0:8], h[0:4])
	hex.Encode(out[9:13], h[4:6])
	hex.Encode(out[14:18], h[6:8])
	hex.Encode(out[19:23], h[8:10])
	hex.Encode(out[24:36], h[10:16])
	out[8], out[13], out[18], out[23] = '-', '-', '-', '-'
	return string(out[:])
}

// memberConditions is how many types of condition a member's status
// has: Ready, Progressing, Degraded, ManifestValid and UpToDate.
const memberConditions = 5

// setCondition sets one condition; LastTransitionTime moves only when the
// status flips. A status's first condition makes room for all of them,
// which a member's first reconcile sets one after the other.
func setCondition(conds []v1alpha1.Condition, c v1alpha1.Condition) []v1alpha1.Condition {
	for i := range conds {
		if conds[i].Type != c.Type {
			continue
		}
		if conds[i].Status == c.Status {
			c.LastTransitionTime = conds[i].LastTransitionTime
		}
		conds[i] = c
		return conds
	}
	if conds == nil {
		conds = make([]v1alpha1.Condition, 0, memberConditions)
	}
	return append(conds, c)
}

// statusBuilder edits a copy of a member's status during one reconcile.
type statusBuilder struct {
	st  v1alpha1.MemberStatus
	obj *v1alpha1.Member // the member the status is of
	gen int64
	now time.Time
	// reconciled: the status is the one a reconcile wrote (memberReconcile.write),
	// which shows any restart that reconcile took (RestartPending).
	reconciled bool
}

func (b *statusBuilder) cond(typ, status, reason, msg string) {
	b.st.Conditions = setCondition(b.st.Conditions, v1alpha1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: b.gen, LastTransitionTime: b.now,
	})
}

// condition returns the condition of type typ, or the zero Condition.
func (b *statusBuilder) condition(typ string) v1alpha1.Condition {
	for _, c := range b.st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return v1alpha1.Condition{}
}

// set writes phase and the three standard conditions at once.
func (b *statusBuilder) set(phase string, ready, progressing, degraded [3]string) {
	b.st.Phase = phase
	b.cond(v1alpha1.ConditionReady, ready[0], ready[1], ready[2])
	b.cond(v1alpha1.ConditionProgressing, progressing[0], progressing[1], progressing[2])
	b.cond(v1alpha1.ConditionDegraded, degraded[0], degraded[1], degraded[2])
}

func (b *statusBuilder) clearPane() {
	b.st.PaneID, b.st.TerminalID, b.st.TabID, b.st.WorkspaceID, b.st.AgentStatus = "", "", "", "", ""
	b.st.ResumedSession = nil
}

func (b *statusBuilder) setPane(r Ownership) {
	b.st.PaneID, b.st.TerminalID, b.st.TabID, b.st.WorkspaceID = r.PaneID, r.TerminalID, r.TabID, r.WorkspaceID
}

func cTrue(reason, msg string) [3]string  { return [3]string{v1alpha1.ConditionTrue, reason, msg} }
func cFalse(reason, msg string) [3]string { return [3]string{v1alpha1.ConditionFalse, reason, msg} }

// statusOf starts a builder from the member's current status.
func (m *Manager) statusOf(mem *v1alpha1.Member) *statusBuilder {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &statusBuilder{obj: mem, gen: mem.Generation, now: m.o.Clock.Now().UTC().Truncate(time.Second)}
	if s := m.stateLocked(mem.Name); s != nil {
		s.status.DeepCopyInto(&b.st)
	}
	b.st.SessionID = sessionID(mem.UID)
	b.st.ObservedGeneration = mem.Generation
	return b
}

// lastObject returns the member as its status was last written for it;
// nil if none was.
func (m *Manager) lastObject(name string) *v1alpha1.Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.stateLocked(name); s != nil {
		return s.object
	}
	return nil
}

// writeStatus stores st if it differs from the current status, updates the
// phase gauge, logs a phase change and wakes waiters. A reconcile's status
// ends the restart asked before that reconcile took it (RestartPending),
// under the lock that publishes the status: whoever reads the new status
// reads no restart pending with it.
func (m *Manager) writeStatus(name string, b *statusBuilder) {
	m.mu.Lock()
	if b.reconciled && !m.restarts[name] {
		delete(m.asked, name)
	}
	s := m.entryLocked(name)
	ok := s.shown
	s.shown = true
	s.object = b.obj
	if b.obj != nil && b.obj.Spec.Prompt != "" {
		m.promptObjs[name] = true
	} else {
		delete(m.promptObjs, name)
	}
	if ok && reflect.DeepEqual(&s.status, &b.st) { // pointers: nothing boxed
		m.mu.Unlock()
		return
	}
	old := s.status.Phase
	setStatus(&s.status, &b.st, &m.lists) // the builder may keep editing its copy
	if old != b.st.Phase {
		if old != "" {
			m.metrics.members.WithLabelValues(old).Dec()
		}
		if b.st.Phase != "" {
			m.metrics.members.WithLabelValues(b.st.Phase).Inc()
		}
	}
	if awaiting := awaitingInput(s.status); awaiting != s.awaiting {
		s.awaiting = awaiting
		if awaiting {
			m.metrics.awaitingInput.Inc()
		} else {
			m.metrics.awaitingInput.Dec()
		}
	}
	m.mu.Unlock()
	if old != b.st.Phase {
		m.log.Info("member phase changed", "member", name, "from", old, "to", b.st.Phase,
			"paneId", b.st.PaneID, "restarts", b.st.Restarts)
	}
	m.changed.Notify()
}

// setStatus makes *dst a deep copy of src whose conditions and plan are
// shared: the lists of a status in m.states are read and copied
// (DeepCopyInto), never changed, so members whose conditions, or plans,
// are alike keep one list (lists). A settled fleet's Ready members'
// conditions mostly are — the same types, reasons and messages, their
// transition times kept to the second — and the members of a profile have
// one plan.
func setStatus(dst, src *v1alpha1.MemberStatus, lists *statusLists) {
	rest := *src
	rest.Conditions, rest.Plan = nil, nil
	*dst = v1alpha1.MemberStatus{}
	rest.DeepCopyInto(dst)
	dst.Conditions, dst.Plan = lists.conditions.share(src.Conditions), lists.plans.share(src.Plan)
}

// statusLists are the lists the statuses in m.states share (setStatus),
// and the agent.start args their starts share (shareLaunch).
type statusLists struct {
	conditions sharedLists[v1alpha1.Condition]
	plans      sharedLists[v1alpha1.PlanRow]
	args       sharedLists[string]
}

// shareLaunch returns a launch's agent.start args and plan as lists that
// members launching alike share, for a start to keep until herdr accepts
// it: a mass start keeps them for every member at once, and the members
// of a profile launch alike (whatever differs, such as the token, is in
// the environment, which tab.create took).
func (m *Manager) shareLaunch(args []string, plan []v1alpha1.PlanRow) ([]string, []v1alpha1.PlanRow) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lists.args.share(args), m.lists.plans.share(plan)
}

// sharedLists are the last lists of one kind m.states kept, each shared
// by every member whose list is the same (setStatus). A handful is
// enough: a fleet's members go through the same few states, in waves, and
// have the plans of a few profiles.
type sharedLists[T comparable] struct {
	recent [8][]T
	next   int
}

// share returns a list equal to list that nothing changes: a recent one,
// or a copy of list that becomes one. An empty list stays empty and a nil
// one nil, as a copy (DeepCopyInto) keeps them.
func (l *sharedLists[T]) share(list []T) []T {
	if len(list) == 0 {
		if list == nil {
			return nil
		}
		return []T{} // no allocation
	}
	for _, r := range l.recent {
		if slices.Equal(r, list) {
			return r
		}
	}
	kept := slices.Clip(slices.Clone(list))
	l.recent[l.next] = kept
	l.next = (l.next + 1) % len(l.recent)
	return kept
}

// forgetMember drops all in-memory state of a deleted member, its memory
// first: once the member is no longer listed, nothing of it is kept.
func (m *Manager) forgetMember(name string) {
	if err := m.memory.forget(name); err != nil {
		m.log.Warn("could not forget a deleted member's memory", "member", name, "err", err)
	}
	m.mu.Lock()
	s := m.states.Get(name)
	ok := s != nil && s.shown
	if ok {
		if s.status.Phase != "" {
			m.metrics.members.WithLabelValues(s.status.Phase).Dec()
		}
		if s.awaiting {
			m.metrics.awaitingInput.Dec()
		}
	}
	if s != nil {
		m.states.Remove(s)
	}
	delete(m.promptObjs, name)
	delete(m.working, name)
	delete(m.asked, name)
	m.mu.Unlock()
	m.setWaiting(name, "")
	if ok {
		m.changed.Notify()
	}
}

func (m *Manager) runtimeOf(name string) *runtime {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runtimeLocked(name)
}

// runtimeLocked is runtimeOf with mu held.
func (m *Manager) runtimeLocked(name string) *runtime {
	return &m.entryLocked(name).rt
}

// event records something that happened to a member, for describe and
// the event watch (woken by Changed), and logs it. A repeat of the
// previous event only bumps its count.
func (m *Manager) event(name, typ, reason, msg string) {
	now := m.o.Clock.Now().UTC()
	m.mu.Lock()
	s := m.entryLocked(name)
	s.shown = true
	if n := len(s.events); n > 0 && s.events[n-1].reason == reason && s.events[n-1].message == msg {
		s.events[n-1].count++
		s.events[n-1].at = now.UnixNano()
	} else {
		s.events = append(s.events, memberEvent{at: now.UnixNano(), warning: typ == v1alpha1.EventWarning, reason: reason, message: msg, count: 1})
		if len(s.events) > DefaultEventHistory {
			s.events = s.events[len(s.events)-DefaultEventHistory:]
		}
	}
	m.mu.Unlock()
	m.changed.Notify()
	if typ == v1alpha1.EventWarning {
		m.log.Warn(msg, "member", name, "reason", reason)
	} else {
		m.log.Info(msg, "member", name, "reason", reason)
	}
}
