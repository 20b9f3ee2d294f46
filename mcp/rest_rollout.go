package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/guard"
	"github.com/fleetd-dev/fleetd/internal/rollout"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// The rollouts of Profiles and Members over REST, `fleetd rollout`'s, the
// primary's (a worker gets 403), RESOURCE profiles or members:
//
//	GET  /rollouts/RESOURCE/{name}                      the rollout: a [RolloutView]; ?watch=1 streams it
//	GET  /rollouts/RESOURCE/{name}/revisions/{revision} one revision with its spec: a [RevisionView]
//	POST /rollouts/RESOURCE/{name}/undo                 {"toRevision": N} (0: the previous one): the spec written back
//	POST /rollouts/RESOURCE/{name}/restart              {"now": bool}: new agents at their next idle moment, or at once
//	POST /rollouts/profiles/{name}/pause                spec.rollout.paused set
//	POST /rollouts/profiles/{name}/resume               spec.rollout.paused cleared, and a stopped rollout's halt
//
// Writes go through the desired state (the manifest file is edited in
// place, comments kept; or etcd), as apply's do: undo writes a revision's
// spec back, held to the subscription guard as any Profile written over
// REST is; pause and resume write spec.rollout.paused; a profile's restart
// writes its fleetd.dev/restartedAt annotation, which rolls out to its
// members as a change of the profile does. A member's restart, and --now,
// go through [Rollouts.Restart] (the controllers' force mechanism), for
// the members this node runs. Member NAME may be a pane, terminal or
// session id too.
//
// The watch is a server-sent event stream: the rollout as MODIFIED events
// (the first one at once), one each time it changes, woken by the
// controllers' change signal ([MemberWaiter.WaitFor]); it counts as a
// member watch stream and a held call, and a comment line every
// [DefaultWatchHeartbeat] keeps it open.

// Rollouts is the profiles' rollouts as the controllers keep them
// (controllers.Manager implements it).
type Rollouts interface {
	// Profile returns a profile with its status (its rollout).
	Profile(name string) (v1alpha1.Profile, bool)
	// ProfileEvents returns a profile's recent events, oldest first.
	ProfileEvents(name string) []v1alpha1.Event
	// Restart replaces a member's running agent with a new one of the
	// same definition: at its next idle moment, or at once with now. It
	// fails with an error for a member this node runs no agent for.
	Restart(member string, now bool) error
	// RestartPending reports whether a restart asked of a member is not in
	// its status yet (its rollout is then not complete).
	RestartPending(member string) bool
	// Revisions is where the revisions and the profiles' halts are kept.
	Revisions() rollout.Store
}

// Rollout states, [RolloutView.State]: kubectl rollout status's outcomes.
const (
	RolloutComplete    = "complete"
	RolloutProgressing = "progressing"
	RolloutPaused      = "paused"
	RolloutFailed      = "failed"
)

// RolloutView is a Profile's or a Member's rollout: where it stands, the
// members it waits for, the revisions kept and, for a profile, its events.
type RolloutView struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Revision is the current revision's number (0: none recorded yet).
	Revision int64 `json:"revision"`
	// State is complete, progressing, paused or failed; Message says why
	// in a person's words.
	State   string `json:"state"`
	Message string `json:"message"`
	// Members, Updated and Ready count a profile's members (1, and 0 or 1,
	// for a member).
	Members int32 `json:"members"`
	Updated int32 `json:"updated"`
	Ready   int32 `json:"ready"`
	// Waits are the members that do not run the current definition yet,
	// or whose new agent is not Ready yet, and what each waits for.
	Waits     []RolloutWait     `json:"waits,omitempty"`
	Revisions []RevisionSummary `json:"revisions"`
	// Events are a profile's recent events on this node.
	Events []v1alpha1.Event `json:"events,omitempty"`
	// Profile or Member is the object, with its status.
	Profile *v1alpha1.Profile `json:"profile,omitempty"`
	Member  *v1alpha1.Member  `json:"member,omitempty"`
	// Halt is what stopped a profile's rollout, while it is stopped.
	Halt *rollout.Halt `json:"halt,omitempty"`
}

// RolloutWait is one member a rollout waits for.
type RolloutWait struct {
	Member  string `json:"member"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// RevisionSummary is one revision as `fleetd rollout history` lists it.
type RevisionSummary struct {
	Revision    int64     `json:"revision"`
	Generation  int64     `json:"generation,omitempty"`
	ChangeCause string    `json:"changeCause,omitempty"`
	Time        time.Time `json:"time"`
}

// RevisionView is one revision with its spec.
type RevisionView struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	RevisionSummary
	Spec json.RawMessage `json:"spec"`
}

// RolloutResult is the body of a rollout write: what it did (rolled back,
// skipped, restarted, paused, resumed), to which object, and the revision
// undo went back to.
type RolloutResult struct {
	Result   string `json:"result"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Revision int64  `json:"revision,omitempty"`
	// Message adds what a person should know: the members --now could not
	// force here, why an undo was skipped.
	Message string `json:"message,omitempty"`
}

// rolloutResources are the REST resources of rollouts, by kind.
var rolloutResources = map[string]string{"profiles": v1alpha1.KindProfile, "members": v1alpha1.KindMember}

func (s *restServer) rolloutRoutes(mux *http.ServeMux) {
	if s.opts.Rollouts == nil || s.opts.Store == nil {
		return
	}
	route := func(pattern string, h func(http.ResponseWriter, *http.Request, string, string)) {
		mux.Handle(pattern, s.authenticated(primaryRoute("rollouts are the operator's; only the primary may read or change them", func(w http.ResponseWriter, r *http.Request) {
			kind, ok := rolloutResources[r.PathValue("resource")]
			if !ok {
				writeError(w, http.StatusNotFound, codeNotFound, "no rollouts of "+quote(r.PathValue("resource"))+"; want profiles or members")
				return
			}
			name := r.PathValue("name")
			if kind == v1alpha1.KindMember {
				if m, ok := s.members.resolve(name); ok {
					name = m.Name
				}
			}
			h(w, r, kind, name)
		})))
	}
	route("GET /rollouts/{resource}/{name}", s.getRollout)
	route("GET /rollouts/{resource}/{name}/revisions/{revision}", s.getRevision)
	route("POST /rollouts/{resource}/{name}/undo", s.undoRollout)
	route("POST /rollouts/{resource}/{name}/restart", s.restartRollout)
	route("POST /rollouts/{resource}/{name}/pause", s.pauseRollout(true))
	route("POST /rollouts/{resource}/{name}/resume", s.pauseRollout(false))
}

func (s *restServer) getRollout(w http.ResponseWriter, r *http.Request, kind, name string) {
	v, te := s.rolloutView(kind, name)
	if te != nil {
		writeToolError(w, te)
		return
	}
	if isWatch(r) {
		id, _ := s.identify(r)
		s.watchRollout(w, r, id, kind, name)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// rolloutView is kind/name's rollout now.
func (s *restServer) rolloutView(kind, name string) (RolloutView, *ToolError) {
	v := RolloutView{Kind: kind, Name: name, Revisions: []RevisionSummary{}}
	h := s.opts.Rollouts.Revisions().Get(kind, name)
	for _, rev := range h.Revisions {
		v.Revisions = append(v.Revisions, summaryOf(rev))
	}
	latest, _ := h.Latest()
	v.Revision = latest.Number
	if kind == v1alpha1.KindProfile {
		p, ok := s.opts.Rollouts.Profile(name)
		if !ok {
			return v, toolErr(codeNotFound, "profile %s not found", quote(name))
		}
		s.profileRollout(&v, &p)
		v.Halt = rollout.Halted(&p, h)
		return v, nil
	}
	// Whether a restart is pending is read before the status: a status read
	// first may be the old agent's, and the restart taken and shown by
	// the time pending is read.
	pending := s.opts.Rollouts.RestartPending(name)
	m, ok := s.opts.Members.Member(name)
	if !ok {
		return v, toolErr(codeNotFound, "%s", memberNotFound(name))
	}
	memberRollout(&v, &m)
	if v.State == RolloutComplete && pending {
		v.Updated, v.Ready, v.State = 0, 0, RolloutProgressing
		v.Message = fmt.Sprintf("member %s: its restart was asked and is about to begin", m.Name)
	}
	return v, nil
}

// profileRollout fills v from profile p's status and its members'.
func (s *restServer) profileRollout(v *RolloutView, p *v1alpha1.Profile) {
	st := p.Status
	v.Profile, v.Members, v.Updated, v.Ready = p, st.Members, st.UpdatedMembers, st.ReadyMembers
	v.Events = s.opts.Rollouts.ProfileEvents(p.Name)
	for _, c := range st.Conditions {
		if c.Type != v1alpha1.ConditionProgressing {
			continue
		}
		v.Message = c.Message
		v.State = map[string]string{v1alpha1.ReasonRolloutComplete: RolloutComplete, v1alpha1.ReasonRolloutFailed: RolloutFailed,
			v1alpha1.ReasonRolloutPaused: RolloutPaused}[c.Reason]
	}
	v.State = cmp.Or(v.State, RolloutProgressing)
	for _, m := range s.opts.Members.Members() {
		if m.Spec.Profile == p.Name && !m.Spec.Paused {
			if w, ok := waitOf(&m); ok {
				v.Waits = append(v.Waits, w)
			}
		}
	}
}

// waitOf is what a member waits for before it runs its current definition
// with its agent Ready; ok is false when it waits for nothing.
func waitOf(m *v1alpha1.Member) (RolloutWait, bool) {
	up, ready := conditionOf(m, v1alpha1.ConditionUpToDate), conditionOf(m, v1alpha1.ConditionReady)
	switch {
	case up.Status == v1alpha1.ConditionFalse:
		return RolloutWait{Member: m.Name, Reason: up.Reason, Message: up.Message}, true
	case ready.Status != v1alpha1.ConditionTrue:
		return RolloutWait{Member: m.Name, Reason: cmp.Or(ready.Reason, m.Status.Phase), Message: cmp.Or(ready.Message, m.Status.LastError)}, true
	}
	return RolloutWait{}, false
}

// memberRollout fills v from member m's status: complete once it runs its
// current definition (and its profile's) and is Ready; failed when it is
// Failed or crash-looping (Degraded), or its profile's rollout stopped;
// paused when its profile's rollout is; progressing otherwise.
func memberRollout(v *RolloutView, m *v1alpha1.Member) {
	v.Member, v.Members = m, 1
	w, waits := waitOf(m)
	if !waits {
		v.Updated, v.Ready, v.State = 1, 1, RolloutComplete
		v.Message = fmt.Sprintf("member %s runs its current definition and is Ready", m.Name)
		return
	}
	v.Waits = []RolloutWait{w}
	up := conditionOf(m, v1alpha1.ConditionUpToDate)
	if up.Status != v1alpha1.ConditionFalse {
		v.Updated = 1
	}
	v.State, v.Message = RolloutProgressing, w.Message
	switch {
	case m.Status.Phase == v1alpha1.PhaseFailed || m.Status.Phase == v1alpha1.PhaseDegraded:
		v.State, v.Message = RolloutFailed, fmt.Sprintf("member %s is %s: %s", m.Name, m.Status.Phase, cmp.Or(m.Status.LastError, w.Message))
	case up.Reason == v1alpha1.ReasonRolloutFailed:
		v.State = RolloutFailed
	case up.Reason == v1alpha1.ReasonRolloutPaused:
		v.State = RolloutPaused
	}
}

func conditionOf(m *v1alpha1.Member, typ string) v1alpha1.Condition {
	for _, c := range m.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return v1alpha1.Condition{}
}

func summaryOf(r rollout.Revision) RevisionSummary {
	return RevisionSummary{Revision: r.Number, Generation: r.Generation, ChangeCause: r.ChangeCause, Time: r.Time}
}

func (s *restServer) getRevision(w http.ResponseWriter, r *http.Request, kind, name string) {
	n, err := strconv.ParseInt(r.PathValue("revision"), 10, 64)
	if err != nil || n < 1 {
		writeToolError(w, toolErr(codeInvalidArgument, "revision %s: want a revision number such as 2", quote(r.PathValue("revision"))))
		return
	}
	rev, te := s.revision(kind, name, n)
	if te != nil {
		writeToolError(w, te)
		return
	}
	writeJSON(w, http.StatusOK, RevisionView{Kind: kind, Name: name, RevisionSummary: summaryOf(rev), Spec: rev.Spec})
}

// revision is revision n of kind/name (0: the one before the current).
func (s *restServer) revision(kind, name string, n int64) (rollout.Revision, *ToolError) {
	ref := strings.ToLower(kind) + "/" + name
	h := s.opts.Rollouts.Revisions().Get(kind, name)
	if len(h.Revisions) == 0 {
		if _, ok := s.opts.Store.Get(kind, name); !ok {
			return rollout.Revision{}, toolErr(codeNotFound, "%s not found", ref)
		}
		return rollout.Revision{}, toolErr(codeNotFound, "%s has no revisions recorded yet", ref)
	}
	if n == 0 {
		rev, ok := h.Previous()
		if !ok {
			return rollout.Revision{}, toolErr(codeNotFound, "%s has no revision before its current one (%d): nothing to go back to", ref, h.Revisions[0].Number)
		}
		return rev, nil
	}
	rev, ok := h.Find(n)
	if !ok {
		return rollout.Revision{}, toolErr(codeNotFound, "revision %d of %s not found; `fleetd rollout history %s` lists the %d kept", n, ref, ref, len(h.Revisions))
	}
	return rev, nil
}

// rolloutRequest is the body of undo and restart.
type rolloutRequest struct {
	ToRevision int64 `json:"toRevision,omitempty"`
	Now        bool  `json:"now,omitempty"`
}

// readRolloutRequest reads the body of undo or restart (an empty body is
// the zero request).
func (s *restServer) readRolloutRequest(w http.ResponseWriter, r *http.Request) (rolloutRequest, bool) {
	var req rolloutRequest
	body, ok := s.readBody(w, r, "a rollout request")
	if !ok {
		return req, false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return req, true
	}
	if err := json.Unmarshal(body, &req); err != nil || req.ToRevision < 0 {
		writeToolError(w, toolErr(codeInvalidArgument, "request body: want {\"toRevision\": N} or {\"now\": true}"))
		return req, false
	}
	return req, true
}

// undoRollout writes a revision's spec back through the desired state.
func (s *restServer) undoRollout(w http.ResponseWriter, r *http.Request, kind, name string) {
	req, ok := s.readRolloutRequest(w, r)
	if !ok {
		return
	}
	rev, te := s.revision(kind, name, req.ToRevision)
	if te != nil {
		writeToolError(w, te)
		return
	}
	cur, found := s.opts.Store.Get(kind, name)
	if !found {
		writeError(w, http.StatusNotFound, codeNotFound, strings.ToLower(kind)+"/"+name+" not found")
		return
	}
	res := RolloutResult{Result: "rolled back", Kind: kind, Name: name, Revision: rev.Number}
	if _, hash, err := rollout.Definition(cur); err == nil && hash == rev.Hash {
		res.Result = "skipped"
		res.Message = fmt.Sprintf("skipped rollback (current %s already matches revision %d)", strings.ToLower(kind), rev.Number)
		writeJSON(w, http.StatusOK, res)
		return
	}
	obj, err := rollout.Restore(cur, rev)
	if err != nil {
		writeToolError(w, toolErr(codeInternal, "%v", err))
		return
	}
	if kind == v1alpha1.KindProfile {
		if err := guard.CheckObjectWrite(obj, cur, s.opts.Store.List(v1alpha1.KindTenant)); err != nil {
			writeToolError(w, boundaryErr(err))
			return
		}
	}
	if err := s.opts.Store.Apply(r.Context(), obj); err != nil {
		writeToolError(w, writeErr(strings.ToLower(kind)+" "+name, err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// restartRollout restarts a member's agent, or every agent of a profile:
// a profile's restart writes its restartedAt annotation (a rollout), and
// with now forces the members this node runs at once.
func (s *restServer) restartRollout(w http.ResponseWriter, r *http.Request, kind, name string) {
	req, ok := s.readRolloutRequest(w, r)
	if !ok {
		return
	}
	res := RolloutResult{Result: "restarted", Kind: kind, Name: name}
	if kind == v1alpha1.KindMember {
		m, ok := s.opts.Members.Member(name)
		if !ok {
			writeError(w, http.StatusNotFound, codeNotFound, memberNotFound(name))
			return
		}
		if node := m.Status.NodeName; node != "" && node != s.opts.Node {
			writeToolError(w, toolErr(codeConflict, "member %s runs on node %s: its restart is made by that node's fleetd (fleetd get nodes %s shows its gateway)", quote(name), node, node))
			return
		}
		if err := s.opts.Rollouts.Restart(name, req.Now); err != nil {
			writeToolError(w, toolErr(codeConflict, "%v: a member's restart is made by the fleetd of the node that runs it", err))
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	p, te := s.storedProfile(name)
	if te != nil {
		writeToolError(w, te)
		return
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	at := s.opts.Clock.Now().UTC()
	stamp := at.Format(time.RFC3339) // kubectl's restartedAt
	if p.Annotations[v1alpha1.AnnotationRestartedAt] == stamp {
		stamp = at.Format(time.RFC3339Nano) // a second restart within the second still changes it
	}
	p.Annotations[v1alpha1.AnnotationRestartedAt] = stamp
	if err := s.opts.Store.Apply(r.Context(), p); err != nil {
		writeToolError(w, writeErr("profile "+name, err))
		return
	}
	if req.Now {
		res.Message = s.restartNow(name)
	}
	writeJSON(w, http.StatusOK, res)
}

// restartNow forces a new agent at once for every member of profile that
// this node runs, and says which members it could not force here.
func (s *restServer) restartNow(profile string) string {
	var elsewhere []string
	for _, m := range s.opts.Members.Members() {
		if m.Spec.Profile != profile || m.Spec.Paused {
			continue
		}
		if err := s.opts.Rollouts.Restart(m.Name, true); err != nil {
			elsewhere = append(elsewhere, m.Name)
		}
	}
	if len(elsewhere) == 0 {
		return ""
	}
	return "not forced here (no agent of theirs runs on this node; they are replaced at their next idle moment): " + strings.Join(elsewhere, ", ")
}

// storedProfile is profile name as the desired state holds it, a copy to
// write.
func (s *restServer) storedProfile(name string) (*v1alpha1.Profile, *ToolError) {
	obj, ok := s.opts.Store.Get(v1alpha1.KindProfile, name)
	p, isProfile := obj.(*v1alpha1.Profile)
	if !ok || !isProfile || p == nil {
		return nil, toolErr(codeNotFound, "profile %s not found", quote(name))
	}
	return p.DeepCopy(), nil
}

// pauseRollout sets (pause) or clears a profile's spec.rollout.paused; a
// resume also clears the halt of a stopped rollout. Pausing a paused
// profile, or resuming one that neither is paused nor stopped, is a
// conflict, as kubectl has it.
func (s *restServer) pauseRollout(pause bool) func(http.ResponseWriter, *http.Request, string, string) {
	verb := map[bool]string{true: "pause", false: "resume"}[pause]
	return func(w http.ResponseWriter, r *http.Request, kind, name string) {
		if kind != v1alpha1.KindProfile {
			writeToolError(w, toolErr(codeInvalidArgument, "rollout %s is for profiles: a member's own update has no rollout to stop (spec.paused closes its agent; `fleetd rollout restart member/%s` replaces it)", verb, name))
			return
		}
		p, te := s.storedProfile(name)
		if te != nil {
			writeToolError(w, te)
			return
		}
		halted := rollout.Halted(p, s.opts.Rollouts.Revisions().Get(v1alpha1.KindProfile, name))
		switch {
		case pause && p.RolloutPaused():
			writeToolError(w, toolErr(codeConflict, "profile %s is already paused", quote(name)))
			return
		case !pause && !p.RolloutPaused() && halted == nil:
			writeToolError(w, toolErr(codeConflict, "profile %s is not paused", quote(name)))
			return
		}
		if p.RolloutPaused() != pause {
			if p.Spec.Rollout == nil {
				p.Spec.Rollout = &v1alpha1.ProfileRollout{}
			}
			p.Spec.Rollout.Paused = pause
			if reflect.ValueOf(*p.Spec.Rollout).IsZero() {
				p.Spec.Rollout = nil // nothing left to say: no empty rollout: {} in the file
			}
			if err := s.opts.Store.Apply(r.Context(), p); err != nil {
				writeToolError(w, writeErr("profile "+name, err))
				return
			}
		}
		if !pause && halted != nil {
			if err := s.opts.Rollouts.Revisions().Update(v1alpha1.KindProfile, name, func(h *rollout.History) bool {
				if h.Halt == nil {
					return false
				}
				h.Halt = nil
				return true
			}); err != nil {
				writeToolError(w, toolErr(codeUnavailable, "clear the stop of profile %s's rollout: %v", name, err))
				return
			}
		}
		writeJSON(w, http.StatusOK, RolloutResult{Result: verb + "d", Kind: kind, Name: name})
	}
}

// watchRollout serves GET /rollouts/RESOURCE/{name}?watch=1: the rollout
// as a MODIFIED event at once and at each change, until the client goes
// or fleetd stops.
func (s *restServer) watchRollout(w http.ResponseWriter, r *http.Request, id tokens.Identity, kind, name string) {
	release, ok := s.eventWatchAllowed(w, r, id)
	if !ok {
		return
	}
	defer release()
	ctx, sw, end, ok := s.startStream(w, r)
	if !ok {
		return
	}
	defer end()
	var sent, frame []byte // the last frame sent, the next one
	gone := false          // the next frame ends the stream
	beat := cmp.Or(s.opts.WatchHeartbeat, DefaultWatchHeartbeat)
	for {
		err := s.waitRollout(ctx, beat, func() bool {
			frame, gone = s.rolloutFrame(kind, name)
			return string(frame) != string(sent)
		})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil: // a quiet beat
			err = sw.Comment("heartbeat")
		default:
			err, sent = sw.WriteEncoded(frame), frame
		}
		if err != nil || gone {
			return
		}
	}
}

// rolloutFrame is kind/name's rollout as a watch event: MODIFIED with the
// rollout, or ERROR once there is none (the object was deleted), which
// ends the stream (end).
func (s *restServer) rolloutFrame(kind, name string) (frame []byte, end bool) {
	v, te := s.rolloutView(kind, name)
	if te != nil {
		var body APIError
		body.Error.Code, body.Error.Message = te.Code, te.Message
		data, _ := json.Marshal(body)
		return appendEvent(nil, WatchError, data), true
	}
	data, _ := json.Marshal(v) // plain data: this does not fail
	return appendEvent(nil, WatchModified, data), false
}

// waitRollout waits, woken by every change the controllers signal, until
// changed holds; after beat it returns an error (the heartbeat's turn),
// and ctx's when ctx ends.
func (s *restServer) waitRollout(ctx context.Context, beat time.Duration, changed func() bool) error {
	waitCtx, beatDone := context.WithCancel(ctx)
	defer beatDone()
	t := s.opts.Clock.AfterFunc(beat, beatDone)
	defer t.Stop()
	return s.opts.Waiter.WaitFor(waitCtx, func([]v1alpha1.Member) bool { return changed() })
}
