package rollout

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Target is what a Profile's rollout takes its members to: a digest of
// what their launches take from the profile — harness, args, env, cwd,
// toolTimeout and worktree — and of its [v1alpha1.AnnotationRestartedAt].
// A change of any of these replaces every member of the profile (each at
// its agent's next idle moment, maxUnavailable at a time); a change of
// anything else (description, restartPolicy, startupTimeout, resume, the
// grace period, spec.rollout itself) is taken by the running agents as it
// is.
func Target(p *v1alpha1.Profile) string {
	s := p.Spec
	data, err := json.Marshal(struct {
		Harness     string                    `json:"harness"`
		Args        []string                  `json:"args,omitempty"`
		Env         map[string]string         `json:"env,omitempty"`
		Cwd         string                    `json:"cwd,omitempty"`
		ToolTimeout v1alpha1.Duration         `json:"toolTimeout"`
		Worktree    *v1alpha1.ProfileWorktree `json:"worktree,omitempty"`
		RestartedAt string                    `json:"restartedAt,omitempty"`
	}{s.Harness, s.Args, s.Env, s.Cwd, s.ToolTimeout, s.Worktree, p.Annotations[v1alpha1.AnnotationRestartedAt]})
	if err != nil {
		return "" // never: the fields always encode
	}
	return digest(data)
}

// MemberState is one member of a Profile as its rollout counts it.
type MemberState struct {
	Name string
	// Updated: the member's agent runs the profile (and its tenant) as
	// they are now, or none runs and the next one will.
	Updated bool
	// Ready: the member's Ready condition is True.
	Ready bool
	// Replacing: the rollout is replacing the member's agent — admitted
	// and waiting for it to be idle, or the new agent not Ready yet. It
	// counts against maxUnavailable.
	Replacing bool
}

// StateOf is a member's state as its status says it — how a node counts a
// member another node of a fleet runs, from the status that node
// publishes: updated when its agent runs p's current [Target] (or none
// runs) and its UpToDate condition is not False, ready when its Ready
// condition is True, replacing when status.rollout names p.
func StateOf(m v1alpha1.Member, p *v1alpha1.Profile) MemberState {
	s := MemberState{Name: m.Name, Updated: m.Status.ProfileTarget == "" || m.Status.ProfileTarget == Target(p), Replacing: m.Status.Rollout == p.Name}
	for _, c := range m.Status.Conditions {
		switch c.Type {
		case v1alpha1.ConditionUpToDate:
			s.Updated = s.Updated && c.Status != v1alpha1.ConditionFalse
		case v1alpha1.ConditionReady:
			s.Ready = c.Status == v1alpha1.ConditionTrue
		}
	}
	return s
}

// Counts are a rollout's member counts.
type Counts struct {
	Members, Updated, Ready int
	// Replacing names the members being replaced, sorted.
	Replacing []string
}

// Count counts members (the profile's, paused ones left out).
func Count(members []MemberState) Counts {
	c := Counts{Members: len(members)}
	for _, m := range members {
		if m.Updated {
			c.Updated++
			if m.Ready {
				c.Ready++
			}
		}
		if m.Replacing {
			c.Replacing = append(c.Replacing, m.Name)
		}
	}
	slices.Sort(c.Replacing) // the same on every node, whatever order members came in
	return c
}

// Status is Profile p's rollout: its current revision (from h), the
// counts of its members (the profile's, paused ones left out) and its
// Progressing condition — False with RolloutComplete once every member is
// updated and Ready; else False with RolloutFailed while a replacement
// that did not become Ready stopped the rollout to p's current [Target]
// (h.Halt); else False with RolloutPaused while spec.rollout.paused is
// set; else True with RollingOut. It is a pure function: the same inputs
// on every node give the same status.
func Status(p *v1alpha1.Profile, members []MemberState, h History) v1alpha1.ProfileStatus {
	c := Count(members)
	st := v1alpha1.ProfileStatus{
		ObservedGeneration: p.Generation, Members: int32(c.Members), UpdatedMembers: int32(c.Updated),
		ReadyMembers: int32(c.Ready), Updating: c.Replacing,
	}
	latest, _ := h.Latest()
	st.Revision = latest.Number
	cond := v1alpha1.Condition{Type: v1alpha1.ConditionProgressing, Status: v1alpha1.ConditionFalse,
		ObservedGeneration: p.Generation, LastTransitionTime: latest.Time}
	ref := "profile/" + p.Name
	progress := fmt.Sprintf("%d of %d members updated, %d of them Ready", c.Updated, c.Members, c.Ready)
	switch halt := Halted(p, h); {
	case c.Updated == c.Members && c.Ready == c.Members:
		cond.Reason = v1alpha1.ReasonRolloutComplete
		cond.Message = fmt.Sprintf("every member (%d) runs the profile as it is and is Ready", c.Members)
		if st.Revision > 0 {
			cond.Message = fmt.Sprintf("every member (%d) runs revision %d and is Ready", c.Members, st.Revision)
		}
	case halt != nil:
		cond.Reason, cond.LastTransitionTime = v1alpha1.ReasonRolloutFailed, halt.Time
		cond.Message = fmt.Sprintf("stopped: %s; %s. `fleetd rollout resume %s` goes on, `fleetd rollout undo %s` goes back",
			HaltText(halt), progress, ref, ref)
	case p.RolloutPaused():
		cond.Reason = v1alpha1.ReasonRolloutPaused
		cond.Message = fmt.Sprintf("paused (spec.rollout.paused); %s. `fleetd rollout resume %s` goes on", progress, ref)
	default:
		cond.Status, cond.Reason = v1alpha1.ConditionTrue, v1alpha1.ReasonRollingOut
		cond.Message = fmt.Sprintf("%s, at most %d replaced at a time", progress, p.MaxUnavailableOf(c.Members))
		if len(c.Replacing) > 0 {
			cond.Message += "; replacing " + strings.Join(c.Replacing, ", ")
		}
	}
	st.Conditions = []v1alpha1.Condition{cond}
	return st
}

// Halted returns the halt that stops p's rollout now: h's, when it stopped
// the rollout to p's current [Target]; nil otherwise.
func Halted(p *v1alpha1.Profile, h History) *Halt {
	if h.Halt == nil || h.Halt.Target != Target(p) {
		return nil
	}
	return h.Halt
}

// HaltText says what stopped a rollout, for conditions and events.
func HaltText(h *Halt) string {
	return fmt.Sprintf("member %s did not become Ready after its replacement (%s)", h.Member, h.Message)
}
