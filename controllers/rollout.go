package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/rollout"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// Profile and Tenant rollouts. What a member's launch takes from the
// objects it references — its Profile's [rollout.Target] (harness, args,
// env, cwd, toolTimeout, worktree, restartedAt) and, for a tenant target,
// its Tenant's url and credentialEnv — is digested into the ownership
// record of each pane (Ownership.Refs). A change of that digest makes the
// member outdated like a change of its own spec does, but its replacement
// first waits for a turn in its profile's rollout:
//
//   - at most spec.rollout.maxUnavailable members of the profile (a count,
//     or a percent of its members rounded down, at least 1; default 1)
//     are being replaced at once — counted on every node of a fleet, from
//     the members' memories here and the statuses other nodes publish
//     (status.rollout);
//   - a member with a turn is replaced as a spec change is: at its agent's
//     next idle moment (graceful.go, UpToDate=False WaitingForIdle, shown
//     Updating), at the latest after its updateStrategy.maxWait; it keeps
//     the turn until its new agent is Ready, then the next member waiting
//     gets one;
//   - a member without a turn keeps its running agent, UpToDate=False
//     RolloutPending (RolloutPaused while spec.rollout.paused is set;
//     RolloutFailed while the rollout is stopped), and is queued again
//     when a turn frees up, the profile changes or its halt is cleared;
//   - a replaced member whose new agent does not become Ready (its start
//     fails, times out, or its pane closes first) stops the rollout: a
//     [rollout.Halt] kept with the profile's revisions (so that every node,
//     and a restarted fleetd, sees it), a RolloutFailed event, and the
//     profile's Progressing condition False until `fleetd rollout resume`
//     or `undo` (or a new change of the profile).
//
// A member's own spec change and a restart it is asked for are its own
// update and take no turn. A pane recorded before fleetd kept the digest
// takes the current one as it is: an upgrade of fleetd replaces nothing.
// Each member's turn and its replacement not yet Ready are in its memory
// (memory.go), so a restart of fleetd keeps them.

// Event reasons of rollouts that are not condition reasons.
const (
	reasonRolledOut    = "RolledOut"
	reasonTurnCanceled = "RolloutTurnCanceled"
)

// Peers are the members other nodes of a fleet run, with the statuses they
// publish (internal/fleet's View): a Profile's rollout counts them against
// its maxUnavailable, and its status counts them.
type Peers interface {
	// Members returns every member of the fleet with its status; the ones
	// this node runs are left out by the caller.
	Members() []v1alpha1.Member
	// Changed returns a channel closed at the next change of the members
	// or their statuses.
	Changed() <-chan struct{}
}

// rollouts is the Manager's part of the profiles' rollouts: who waits for
// a turn, and each profile's recent events.
type rollouts struct {
	// turnMu serialises the decisions that give turns, so that two
	// members of one profile reconciled at once never both take the last
	// one. It is held over the memory write of a turn (the disk), never
	// by a request handler.
	turnMu sync.Mutex

	mu      sync.Mutex
	pending map[string]map[string]bool // profile → members waiting for a turn
	events  map[string][]v1alpha1.Event
	peers   Peers
}

func newRollouts() *rollouts {
	return &rollouts{pending: map[string]map[string]bool{}, events: map[string][]v1alpha1.Event{}}
}

// FollowPeers makes the profiles' rollouts count the members other nodes
// of a fleet run. Call it before Run.
func (m *Manager) FollowPeers(p Peers) {
	m.rolls.mu.Lock()
	m.rolls.peers = p
	m.rolls.mu.Unlock()
}

// refsHash digests what a launch takes from the objects a member
// references: its profile's target and, for a tenant target, its tenant's
// spec (the tenant's url and credential slot name: never a credential).
func refsHash(p *v1alpha1.Profile, t *v1alpha1.Tenant) string {
	in := struct {
		Profile string               `json:"profile"`
		Tenant  *v1alpha1.TenantSpec `json:"tenant,omitempty"`
	}{Profile: rollout.Target(p)}
	if t != nil {
		in.Tenant = &t.Spec
	}
	data, _ := json.Marshal(in) // never fails: strings only
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// digests remembers refsHash by the objects it digests. A snapshot never
// changes an object it holds — a changed definition is a new object — so
// the digest of the same profile and tenant is the same; every reconcile
// of a member compares its pane's digest with the current one, and a
// fleet's members share a few profiles. It forgets everything once it
// holds maxDigests, so that replaced objects are not kept for good.
type digests struct {
	mu   sync.Mutex
	refs map[refsKey]string
}

type refsKey struct {
	p *v1alpha1.Profile
	t *v1alpha1.Tenant
}

// maxDigests bounds what digests remembers: many times the profile and
// tenant pairs of a fleet, far less memory than one member's state.
const maxDigests = 1024

// refsOf is refsHash(p, t).
func (d *digests) refsOf(p *v1alpha1.Profile, t *v1alpha1.Tenant) string {
	k := refsKey{p, t}
	d.mu.Lock()
	h, ok := d.refs[k]
	d.mu.Unlock()
	if ok {
		return h
	}
	h = refsHash(p, t)
	d.mu.Lock()
	if d.refs == nil || len(d.refs) >= maxDigests {
		d.refs = map[refsKey]string{}
	}
	d.refs[k] = h
	d.mu.Unlock()
	return h
}

// tenantOf is the Tenant mem targets, nil for a resident target (or one
// the snapshot lacks).
func tenantOf(mem *v1alpha1.Member, snap *store.Snapshot) *v1alpha1.Tenant {
	if t := mem.Spec.MCPTarget; t != nil && t.Kind == v1alpha1.TargetTenant {
		return snap.Tenants[t.TenantID]
	}
	return nil
}

// refs is the digest of what the member's launch takes from its profile
// and tenant as they are now.
func (r *memberReconcile) refs() string {
	return r.m.digests.refsOf(r.profile, tenantOf(r.mem, r.snap))
}

// keepRefs gives a pane recorded before fleetd kept the digest of its
// references the current one, as it is: it was launched with whatever
// they were, and an upgrade of fleetd must not replace every agent.
func (r *memberReconcile) keepRefs() error {
	if !r.owned || r.rec.Refs != "" {
		return nil
	}
	r.rec.Refs, r.rec.Target = r.refs(), rollout.Target(r.profile)
	return r.m.own.put(r.rec)
}

// refsOutdated reports whether the member's pane was launched with an
// older definition of its profile or tenant.
func (r *memberReconcile) refsOutdated() bool { return r.rec.Refs != r.refs() }

// ownChange reports whether the member's own definition needs an agent
// other than the running one, or a restart was asked for: its own update,
// which takes no turn in its profile's rollout.
func (r *memberReconcile) ownChange() bool {
	if u := r.memo.Update; u != nil && u.Restart {
		return true
	}
	return r.rec.UID != r.mem.UID || r.rec.Launch == "" || r.rec.Launch != launchHash(r.mem)
}

// awaitTurn holds a replacement that only the member's profile or tenant
// asks for until the profile's rollout gives the member a turn, and
// reports wait while it does not: its agent runs on, UpToDate=False says
// why (RolloutPending, RolloutPaused, RolloutFailed), and it is queued
// again when that may change. A turn taken before the rollout was paused
// or stopped, and not yet used (the replacement waits for idle), is given
// back unless forced.
func (r *memberReconcile) awaitTurn() (wait bool, err error) {
	if r.ownChange() {
		return false, nil
	}
	p := r.profile
	reason, why := r.m.rolloutStopped(p)
	if u := r.memo.Update; u != nil && u.Rollout != "" {
		if reason == "" || u.Force {
			return false, nil
		}
		if err := r.remember(func(mm *memory) { mm.Update = nil }); err != nil {
			return false, err
		}
		r.event(v1alpha1.EventNormal, reasonTurnCanceled, fmt.Sprintf("%s; its agent, still busy, is not replaced now", why))
	}
	// Noted as waiting before the look at the turns, so that a turn freed
	// after it queues the member again (one freed between the look and a
	// later note would be missed for good: chaos seed 20 waited so).
	r.m.waitTurn(p.Name, r.name)
	if reason == "" {
		ok, msg, err := r.m.takeTurn(r)
		if err != nil || ok {
			return false, err
		}
		reason, why = v1alpha1.ReasonRolloutPending, msg
	}
	r.b.cond(v1alpha1.ConditionUpToDate, v1alpha1.ConditionFalse, reason,
		fmt.Sprintf("runs an older definition of profile %s (or its tenant); %s; its agent runs on meanwhile", p.Name, why))
	r.updateWaits = true
	return true, nil
}

// rolloutStopped says whether profile p's rollout gives no turns now, and
// why: its halt (RolloutFailed) or spec.rollout.paused (RolloutPaused);
// "" when it goes on.
func (m *Manager) rolloutStopped(p *v1alpha1.Profile) (reason, why string) {
	ref := "profile/" + p.Name
	if halt := rollout.Halted(p, m.revs.Get(v1alpha1.KindProfile, p.Name)); halt != nil {
		return v1alpha1.ReasonRolloutFailed, fmt.Sprintf("%s's rollout stopped: %s (`fleetd rollout resume %s` goes on)", ref, rollout.HaltText(halt), ref)
	}
	if p.RolloutPaused() {
		return v1alpha1.ReasonRolloutPaused, fmt.Sprintf("%s's rollout is paused (`fleetd rollout resume %s` goes on)", ref, ref)
	}
	return "", ""
}

// takeTurn gives the member a turn in its profile's rollout if fewer than
// maxUnavailable of the profile's members are being replaced, recording
// it in the member's memory before anyone else is counted; else it says,
// in msg, who holds the turns.
func (m *Manager) takeTurn(r *memberReconcile) (ok bool, msg string, err error) {
	p := r.profile
	m.rolls.turnMu.Lock()
	defer m.rolls.turnMu.Unlock()
	states := m.profileStates(p, r.snap)
	c := rollout.Count(states)
	budget := p.MaxUnavailableOf(c.Members)
	free := budget - len(c.Replacing)
	if ahead := queueAhead(states, r.snap, r.name); free <= 0 || len(ahead) >= free {
		msg = fmt.Sprintf("it waits for its turn in profile/%s's rollout (maxUnavailable %d; being replaced: %s", p.Name, budget, strings.Join(c.Replacing, ", "))
		if len(c.Replacing) == 0 {
			msg = fmt.Sprintf("it waits for its turn in profile/%s's rollout (maxUnavailable %d", p.Name, budget)
		}
		if len(ahead) > 0 {
			msg += "; next: " + strings.Join(ahead, ", ")
		}
		return false, msg + ")", nil
	}
	now := m.o.Clock.Now()
	if err := r.remember(func(mm *memory) {
		if mm.Update == nil {
			mm.Update = &updating{Since: now}
		}
		mm.Update.Rollout = p.Name
	}); err != nil {
		return false, "", err
	}
	m.unwaitTurn(p.Name, r.name)
	msg = fmt.Sprintf("profile/%s's rollout replaces member %s's agent next (%d of %d members updated)", p.Name, r.name, c.Updated, c.Members)
	r.event(v1alpha1.EventNormal, v1alpha1.ReasonRollingOut, msg+", once it is idle")
	m.profileEvent(p.Name, v1alpha1.EventNormal, v1alpha1.ReasonRollingOut, msg)
	return true, "", nil
}

// queueAhead lists the members that take a turn in their profile's
// rollout before member: those not updated nor being replaced whose name
// sorts before it — this node's, and the Ready ones other nodes run (a
// lost node's would hold the queue). Every node orders them so, so that
// nodes counting the same fleet give the free turns to the same members,
// though what each has read of the others lags a little.
func queueAhead(states []rollout.MemberState, snap *store.Snapshot, member string) []string {
	var ahead []string
	for _, s := range states {
		_, local := snap.Members[s.Name]
		if s.Name < member && !s.Updated && !s.Replacing && (local || s.Ready) {
			ahead = append(ahead, s.Name)
		}
	}
	sort.Strings(ahead)
	return ahead
}

// replacing is the profile whose rollout is replacing a member's agent
// now, as its memory says: a turn taken, or the new agent not Ready yet.
func replacing(mm memory) string {
	if u := mm.Update; u != nil && u.Rollout != "" {
		return u.Rollout
	}
	if mm.Replaced != nil {
		return mm.Replaced.Profile
	}
	return ""
}

// profileStates counts profile p's members for its rollout: those this
// node declares from their panes and memories, and those other nodes run
// from the statuses they publish; paused members, and those whose prune
// is held (their agent is not replaced, prune.go), are left out.
func (m *Manager) profileStates(p *v1alpha1.Profile, snap *store.Snapshot) []rollout.MemberState {
	var out []rollout.MemberState
	for name, mem := range snap.Members { // in no order: what reads the states orders what it shows
		if _, held := snap.PruneHeld[name]; mem.Spec.Profile != p.Name || mem.Spec.Paused || held {
			continue
		}
		out = append(out, m.localState(mem, p, m.digests.refsOf(p, tenantOf(mem, snap))))
	}
	m.rolls.mu.Lock()
	peers := m.rolls.peers
	m.rolls.mu.Unlock()
	if peers == nil {
		return out
	}
	for _, mem := range peers.Members() {
		if _, local := snap.Members[mem.Name]; local || mem.Spec.Profile != p.Name || mem.Spec.Paused || pruneHeld(mem) {
			continue
		}
		out = append(out, rollout.StateOf(mem, p))
	}
	return out
}

// pruneHeld reports whether the node that runs member m holds its prune,
// as its published status says (ManifestValid False, PruneHeld).
func pruneHeld(m v1alpha1.Member) bool {
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.ConditionManifestValid {
			return c.Reason == v1alpha1.ReasonPruneHeld
		}
	}
	return false
}

// localState is how a member this node declares counts in its profile's
// rollout: updated when no pane runs for it (the next one runs the
// current definition) or its pane runs its current definition, profile
// and tenant (whose digest is refs, refsHash's); replacing as its memory
// says.
func (m *Manager) localState(mem *v1alpha1.Member, p *v1alpha1.Profile, refs string) rollout.MemberState {
	mm := m.memory.get(mem.Name)
	s := rollout.MemberState{Name: mem.Name, Updated: true, Replacing: replacing(mm) == p.Name}
	if rec, ok := m.own.get(mem.Name); ok {
		restart := mm.Update != nil && mm.Update.Restart
		s.Updated = !restart && rec.UID == mem.UID && rec.Launch == m.launchHashOf(mem) &&
			(rec.Refs == "" || rec.Refs == refs)
	}
	m.mu.Lock()
	if st := m.stateLocked(mem.Name); st != nil {
		for _, c := range st.status.Conditions {
			if c.Type == v1alpha1.ConditionReady {
				s.Ready = c.Status == v1alpha1.ConditionTrue
			}
		}
	}
	m.mu.Unlock()
	return s
}

// launchHashOf is launchHash(mem), computed once per definition of a
// member and remembered until the member is forgotten (forgetMember) —
// also before it has a status: /metrics counts every member's rollout
// state on each scrape, and a fleet starting is scraped while many of its
// members have their pane and not yet a status.
func (m *Manager) launchHashOf(mem *v1alpha1.Member) string {
	m.mu.Lock()
	if l := m.runtimeLocked(mem.Name).launch; l.of == mem {
		m.mu.Unlock()
		return l.hash
	}
	m.mu.Unlock()
	h := launchHash(mem)
	m.mu.Lock()
	m.runtimeLocked(mem.Name).launch = launchMemo{of: mem, hash: h}
	m.mu.Unlock()
	return h
}

// waitTurn notes that member waits for a turn in profile's rollout.
func (m *Manager) waitTurn(profile, member string) {
	m.rolls.mu.Lock()
	defer m.rolls.mu.Unlock()
	if m.rolls.pending[profile] == nil {
		m.rolls.pending[profile] = map[string]bool{}
	}
	m.rolls.pending[profile][member] = true
}

// unwaitTurn notes that member no longer waits for a turn.
func (m *Manager) unwaitTurn(profile, member string) {
	m.rolls.mu.Lock()
	defer m.rolls.mu.Unlock()
	delete(m.rolls.pending[profile], member)
}

// queuePlace is where member name stands in its profile's rollout, as
// this node's record of its pane and its memory say: the definition its
// pane runs (none), and the turn it holds. A reconcile that changes it
// frees the queue (Manager.reconcile): a turn ended, or a member the
// others waited behind was updated by a change of its own, restarted,
// deleted or paused, and those waiting must look again.
func (m *Manager) queuePlace(name string) rolloutPlace {
	rec, ok := m.own.get(name)
	return rolloutPlace{owned: ok, uid: rec.UID, launch: rec.Launch, refs: rec.Refs, turn: replacing(m.memory.get(name))}
}

// rolloutPlace is a member's place in its profile's rollout (queuePlace).
type rolloutPlace struct {
	owned                   bool
	uid, launch, refs, turn string
}

// turnFreed queues every member waiting for a turn in profile's rollout
// ("" every profile's): a turn freed up, or what stopped the rollout may
// have gone. A member that still waits notes so again.
func (m *Manager) turnFreed(profile string) {
	m.rolls.mu.Lock()
	var names []string
	for p, members := range m.rolls.pending {
		if profile != "" && p != profile {
			continue
		}
		for n := range members {
			names = append(names, n)
		}
		delete(m.rolls.pending, p)
	}
	m.rolls.mu.Unlock()
	for _, n := range names {
		m.queue.Add(n)
	}
}

// followRollouts queues the members waiting for a turn at every change of
// the revision store (a halt cleared, on any node) and of the fleet's
// other nodes' members (a turn freed there), until ctx ends.
func (m *Manager) followRollouts(ctx context.Context) {
	revs, peers := m.rolloutChanges()
	for {
		select {
		case <-ctx.Done():
			return
		case <-revs:
		case <-peers:
		}
		// Taken before acting: a change while turnFreed runs wakes the
		// next round.
		revs, peers = m.rolloutChanges()
		m.turnFreed("")
	}
}

// rolloutChanges returns the channels closed at the next change of the
// revision store and of the other nodes' members (nil on one machine).
func (m *Manager) rolloutChanges() (revs, peers <-chan struct{}) {
	m.rolls.mu.Lock()
	defer m.rolls.mu.Unlock()
	if p := m.rolls.peers; p != nil {
		peers = p.Changed()
	}
	return m.revs.Changed(), peers
}

// replacedNow is told that the member gets its new pane: a turn it held
// becomes a replacement whose new agent must become Ready, remembered
// with the rollout's target it runs.
func (r *memberReconcile) replacedNow(mm *memory) {
	if u := mm.Update; u != nil && u.Rollout != "" && r.profile != nil {
		mm.Replaced = &replaced{Profile: u.Rollout, Target: rollout.Target(r.profile), Since: r.m.o.Clock.Now()}
	}
}

// rolledOut is told that the member's agent is Ready: a replacement of its
// profile's rollout is done, and the rollout, if every member is updated
// now, too.
func (r *memberReconcile) rolledOut() error {
	rp := r.memo.Replaced
	if rp == nil {
		return nil
	}
	if err := r.remember(func(mm *memory) { mm.Replaced = nil }); err != nil {
		return err
	}
	r.m.metrics.rollouts.replacements.WithLabelValues(rp.Profile, replacementReady).Inc()
	r.event(v1alpha1.EventNormal, reasonRolledOut, fmt.Sprintf("the new agent of profile/%s's rollout is Ready", rp.Profile))
	if p := r.snap.Profiles[rp.Profile]; p != nil {
		if c := rollout.Count(r.m.profileStates(p, r.snap)); c.Updated == c.Members {
			r.m.profileEvent(p.Name, v1alpha1.EventNormal, v1alpha1.ReasonRolloutComplete,
				fmt.Sprintf("every member (%d) runs the profile as it is", c.Members))
		}
	}
	return nil
}

// replacementFailed is told that the member's new agent failed (why)
// before it was Ready: when a profile's rollout replaced it, the rollout
// stops — a halt kept with the profile's revisions, on every node — unless
// the profile changed since (a new rollout).
func (r *memberReconcile) replacementFailed(why string) {
	rp := r.memo.Replaced
	if rp == nil {
		return
	}
	if err := r.remember(func(mm *memory) { mm.Replaced = nil }); err != nil {
		r.m.log.Warn("could not forget a failed replacement", "member", r.name, "err", err)
	}
	p := r.snap.Profiles[rp.Profile]
	if p == nil || rollout.Target(p) != rp.Target {
		return
	}
	r.m.metrics.rollouts.replacements.WithLabelValues(p.Name, replacementFailed).Inc()
	h := r.m.revs.Get(v1alpha1.KindProfile, p.Name)
	latest, _ := h.Latest()
	halt := rollout.Halt{Target: rp.Target, Revision: latest.Number, Member: r.name, Message: why, Time: r.m.o.Clock.Now().UTC()}
	msg := fmt.Sprintf("profile/%s's rollout stopped: %s", p.Name, rollout.HaltText(&halt))
	r.event(v1alpha1.EventWarning, v1alpha1.ReasonRolloutFailed, msg)
	r.m.profileEvent(p.Name, v1alpha1.EventWarning, v1alpha1.ReasonRolloutFailed, msg)
	if err := r.m.revs.Update(v1alpha1.KindProfile, p.Name, func(h *rollout.History) bool {
		h.Halt = &halt
		return true
	}); err != nil {
		r.m.log.Warn("could not keep the stop of a rollout", "profile", p.Name, "err", err)
	}
}

// profileEvent records an event of profile name, for describe, and logs
// it. A repeat of the previous event only bumps its count.
func (m *Manager) profileEvent(name, typ, reason, msg string) {
	now := m.o.Clock.Now().UTC()
	m.rolls.mu.Lock()
	evs := m.rolls.events[name]
	if n := len(evs); n > 0 && evs[n-1].Reason == reason && evs[n-1].Message == msg {
		evs[n-1].Count++
		evs[n-1].Time = now
	} else {
		evs = append(evs, v1alpha1.Event{Time: now, Type: typ, Reason: reason, Message: msg, Count: 1})
		if len(evs) > DefaultEventHistory {
			evs = evs[len(evs)-DefaultEventHistory:]
		}
	}
	m.rolls.events[name] = evs
	m.rolls.mu.Unlock()
	m.changed.Notify()
	m.log.Info(msg, "profile", name, "reason", reason)
}

// ProfileEvents returns profile name's recent events on this node, oldest
// first.
func (m *Manager) ProfileEvents(name string) []v1alpha1.Event {
	m.rolls.mu.Lock()
	defer m.rolls.mu.Unlock()
	return slices.Clone(m.rolls.events[name])
}

// Profile returns profile name with its status: its rollout to its
// members, as this node counts them (and the members other nodes run, as
// they publish them).
func (m *Manager) Profile(name string) (v1alpha1.Profile, bool) {
	snap := m.store.Snapshot()
	p, ok := snap.Profiles[name]
	if !ok {
		return v1alpha1.Profile{}, false
	}
	return m.withRollout(p, snap), true
}

// Profiles returns every profile with its status, sorted by name.
func (m *Manager) Profiles() []v1alpha1.Profile {
	snap := m.store.Snapshot()
	out := make([]v1alpha1.Profile, 0, len(snap.Profiles))
	for _, name := range sortedNames(snap.Profiles) {
		out = append(out, m.withRollout(snap.Profiles[name], snap))
	}
	return out
}

func (m *Manager) withRollout(p *v1alpha1.Profile, snap *store.Snapshot) v1alpha1.Profile {
	out := *p.DeepCopy()
	out.Status = rollout.Status(p, m.profileStates(p, snap), m.revs.Get(v1alpha1.KindProfile, p.Name))
	return out
}

// Revisions returns the revision store the Manager reads (and writes
// halts to).
func (m *Manager) Revisions() rollout.Store { return m.revs }

func sortedNames[T any](objs map[string]T) []string {
	names := make([]string, 0, len(objs))
	for n := range objs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
