package v1alpha1

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Annotations fleetd reads (and, for AnnotationRestartedAt, writes) on the
// objects themselves, as kubectl's kubernetes.io/change-cause and
// kubectl.kubernetes.io/restartedAt.
const (
	// AnnotationChangeCause, on a Profile or Member, is the change cause
	// `fleetd rollout history` shows for the revision it was written
	// with; without it the history names the spec fields that changed.
	AnnotationChangeCause = "fleetd.dev/change-cause"
	// AnnotationRestartedAt, on a Profile, is when `fleetd rollout restart
	// profile/NAME` asked for its members' agents to be replaced: a new
	// value rolls out to them as a change of the profile does.
	AnnotationRestartedAt = "fleetd.dev/restartedAt"
)

// DefaultMaxUnavailable is how many of a Profile's members a rollout
// replaces at once when its spec.rollout.maxUnavailable is not set.
const DefaultMaxUnavailable = 1

// ProfileRollout says how a change of a Profile — or of a Tenant its
// members use — reaches the profile's running members: each member's agent
// is replaced at its next idle moment (as a Member's own spec change is),
// at most MaxUnavailable at a time, the next one only once the new agent
// is Ready.
type ProfileRollout struct {
	// MaxUnavailable is how many members are being replaced at once: a
	// count (2) or a percent of the profile's members ("25%", rounded
	// down, at least 1). nil: 1.
	MaxUnavailable *IntOrPercent `json:"maxUnavailable,omitempty"`
	// Paused stops the rollout: no further member is replaced until it is
	// false again (`fleetd rollout pause|resume profile/NAME`). A member
	// whose replacement was already waiting for its agent to be idle is
	// left on its running agent.
	Paused bool `json:"paused,omitempty"`
}

// IntOrPercent is a count or a percent, written as a number (2) or a
// string ending in "%" ("25%"), as Kubernetes' IntOrString is in a
// Deployment's maxUnavailable.
type IntOrPercent struct {
	Value   int32
	Percent bool
}

// String writes the value as it is written in a manifest: "2" or "25%".
func (v IntOrPercent) String() string {
	if v.Percent {
		return strconv.Itoa(int(v.Value)) + "%"
	}
	return strconv.Itoa(int(v.Value))
}

// MarshalJSON writes a count as a number and a percent as a string.
func (v IntOrPercent) MarshalJSON() ([]byte, error) {
	if v.Percent {
		return json.Marshal(v.String())
	}
	return json.Marshal(v.Value)
}

// UnmarshalJSON reads a number, or a string of digits ending in "%".
func (v *IntOrPercent) UnmarshalJSON(b []byte) error {
	var n int32
	if err := json.Unmarshal(b, &n); err == nil {
		*v = IntOrPercent{Value: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a count such as 2 or a percent such as \"25%%\"")
	}
	p, err := ParsePercent(s)
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// ParsePercent reads a percent written as a string: digits ending in "%".
func ParsePercent(s string) (IntOrPercent, error) {
	digits, ok := strings.CutSuffix(s, "%")
	n, err := strconv.ParseInt(digits, 10, 32)
	if !ok || err != nil || digits == "" || digits[0] == '+' || digits[0] == '-' {
		return IntOrPercent{}, fmt.Errorf("invalid value %q; want a count such as 2 or a percent such as \"25%%\"", s)
	}
	return IntOrPercent{Value: int32(n), Percent: true}, nil
}

// DeepCopy returns a copy of v.
func (v *IntOrPercent) DeepCopy() *IntOrPercent {
	if v == nil {
		return nil
	}
	out := *v
	return &out
}

// DeepCopyInto copies r into out.
func (r *ProfileRollout) DeepCopyInto(out *ProfileRollout) {
	*out = *r
	out.MaxUnavailable = r.MaxUnavailable.DeepCopy()
}

// DeepCopy returns a deep copy of r.
func (r *ProfileRollout) DeepCopy() *ProfileRollout {
	if r == nil {
		return nil
	}
	out := new(ProfileRollout)
	r.DeepCopyInto(out)
	return out
}

// MaxUnavailableOf is how many of a profile's members members its rollout
// replaces at once: spec.rollout.maxUnavailable resolved against members
// (a percent rounded down), at least 1 so that a rollout always moves.
func (p *Profile) MaxUnavailableOf(members int) int {
	n := DefaultMaxUnavailable
	if r := p.Spec.Rollout; r != nil && r.MaxUnavailable != nil {
		n = int(r.MaxUnavailable.Value)
		if r.MaxUnavailable.Percent {
			n = members * n / 100
		}
	}
	return max(n, 1)
}

// RolloutPaused reports whether the profile's spec.rollout.paused is set.
func (p *Profile) RolloutPaused() bool { return p.Spec.Rollout != nil && p.Spec.Rollout.Paused }

// validateRollout checks a Profile's spec.rollout.
func validateRollout(errs *FieldErrors, r *ProfileRollout) {
	if r == nil || r.MaxUnavailable == nil {
		return
	}
	switch v := r.MaxUnavailable; {
	case v.Percent && (v.Value < 1 || v.Value > 100):
		errs.add("spec.rollout.maxUnavailable", "%s out of range; want a percent from 1%% to 100%%", v)
	case !v.Percent && v.Value < 1:
		errs.add("spec.rollout.maxUnavailable", "%s out of range; want at least 1 (fleetd starts no extra agents, so 0 would replace nothing)", v)
	}
}

// ProfileStatus is a Profile's rollout as fleetd sees it: computed from
// its members' statuses and its revision history, never written into the
// operator's file.
type ProfileStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Revision is the number of the profile's current revision (`fleetd
	// rollout history profile/NAME`); 0 before fleetd recorded one.
	Revision int64 `json:"revision,omitempty"`
	// Members counts the members that use the profile and are not paused
	// (nor held by a prune hold); UpdatedMembers those whose agent runs
	// the profile (and their tenant) as it is now; ReadyMembers those of
	// them that are Ready.
	Members        int32 `json:"members"`
	UpdatedMembers int32 `json:"updatedMembers"`
	ReadyMembers   int32 `json:"readyMembers"`
	// Updating names the members whose agent the rollout replaces now:
	// waiting for the agent to be idle, or the new agent starting.
	Updating []string `json:"updating,omitempty"`
	// Conditions: Progressing, True (RollingOut) while members run an
	// older definition, False once they all run this one
	// (RolloutComplete), or while the rollout is paused (RolloutPaused)
	// or stopped by a replacement that did not become Ready
	// (RolloutFailed).
	Conditions []Condition `json:"conditions,omitempty"`
}

// DeepCopyInto copies s into out.
func (s *ProfileStatus) DeepCopyInto(out *ProfileStatus) {
	*out = *s
	if s.Updating != nil {
		out.Updating = append([]string(nil), s.Updating...)
	}
	if s.Conditions != nil {
		out.Conditions = append([]Condition(nil), s.Conditions...)
	}
}
