package v1alpha1

import "maps"

// Hand-written deep copies, shaped like controller-gen's output so the types
// can become CRDs unchanged. Every map, slice and pointer is copied; a copy
// shares no memory with its original.

// DeepCopyInto copies t into out.
func (t *TypeMeta) DeepCopyInto(out *TypeMeta) { *out = *t }

// DeepCopyInto copies m into out.
func (m *ObjectMeta) DeepCopyInto(out *ObjectMeta) {
	*out = *m
	out.Labels = copyStringMap(m.Labels)
	out.Annotations = copyStringMap(m.Annotations)
	if m.CreationTimestamp != nil {
		ts := *m.CreationTimestamp
		out.CreationTimestamp = &ts
	}
}

// DeepCopy returns a deep copy of m.
func (m *ObjectMeta) DeepCopy() *ObjectMeta {
	if m == nil {
		return nil
	}
	out := new(ObjectMeta)
	m.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies t into out.
func (t *MCPTarget) DeepCopyInto(out *MCPTarget) { *out = *t }

// DeepCopy returns a deep copy of t.
func (t *MCPTarget) DeepCopy() *MCPTarget {
	if t == nil {
		return nil
	}
	out := new(MCPTarget)
	t.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies s into out.
func (s *MemberSpec) DeepCopyInto(out *MemberSpec) {
	*out = *s
	out.MCPTarget = s.MCPTarget.DeepCopy()
	if s.NodeSelector != nil {
		out.NodeSelector = maps.Clone(s.NodeSelector)
	}
	out.Worktree = s.Worktree.DeepCopy()
	out.TerminationGracePeriod = s.TerminationGracePeriod.DeepCopy()
	out.UpdateStrategy = s.UpdateStrategy.DeepCopy()
}

// DeepCopy returns a deep copy of w.
func (w *MemberWorktree) DeepCopy() *MemberWorktree {
	if w == nil {
		return nil
	}
	out := *w
	return &out
}

// DeepCopy returns a deep copy of w.
func (w *ProfileWorktree) DeepCopy() *ProfileWorktree {
	if w == nil {
		return nil
	}
	out := *w
	return &out
}

// DeepCopy returns a deep copy of s.
func (s *WorktreeStatus) DeepCopy() *WorktreeStatus {
	if s == nil {
		return nil
	}
	out := *s
	return &out
}

// DeepCopy returns a deep copy of d.
func (d *Duration) DeepCopy() *Duration {
	if d == nil {
		return nil
	}
	out := *d
	return &out
}

// DeepCopyInto copies u into out.
func (u *UpdateStrategy) DeepCopyInto(out *UpdateStrategy) {
	*out = *u
	out.MaxWait = u.MaxWait.DeepCopy()
}

// DeepCopy returns a deep copy of u.
func (u *UpdateStrategy) DeepCopy() *UpdateStrategy {
	if u == nil {
		return nil
	}
	out := new(UpdateStrategy)
	u.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies c into out.
func (c *Condition) DeepCopyInto(out *Condition) { *out = *c }

// DeepCopyInto copies r into out.
func (r *PlanRow) DeepCopyInto(out *PlanRow) { *out = *r }

// DeepCopyInto copies s into out.
func (s *MemberStatus) DeepCopyInto(out *MemberStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]Condition, len(s.Conditions))
		copy(out.Conditions, s.Conditions)
	}
	if s.Plan != nil {
		out.Plan = make([]PlanRow, len(s.Plan))
		copy(out.Plan, s.Plan)
	}
	out.ResumedSession = s.ResumedSession.DeepCopy()
	out.Worktree = s.Worktree.DeepCopy()
}

// DeepCopyInto copies s into out.
func (s *AgentSession) DeepCopyInto(out *AgentSession) { *out = *s }

// DeepCopy returns a deep copy of s.
func (s *AgentSession) DeepCopy() *AgentSession {
	if s == nil {
		return nil
	}
	out := new(AgentSession)
	s.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies m into out.
func (m *Member) DeepCopyInto(out *Member) {
	*out = *m
	m.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	m.Spec.DeepCopyInto(&out.Spec)
	m.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy of m.
func (m *Member) DeepCopy() *Member {
	if m == nil {
		return nil
	}
	out := new(Member)
	m.DeepCopyInto(out)
	return out
}

// DeepCopyObject returns a deep copy of m as an Object.
func (m *Member) DeepCopyObject() Object { return m.DeepCopy() }

// DeepCopyInto copies s into out.
func (s *ProfileSpec) DeepCopyInto(out *ProfileSpec) {
	*out = *s
	if s.Args != nil {
		out.Args = make([]string, len(s.Args))
		copy(out.Args, s.Args)
	}
	out.Env = copyStringMap(s.Env)
	out.Worktree = s.Worktree.DeepCopy()
	out.Rollout = s.Rollout.DeepCopy()
}

// DeepCopyInto copies p into out.
func (p *Profile) DeepCopyInto(out *Profile) {
	*out = *p
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	p.Spec.DeepCopyInto(&out.Spec)
	p.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy of p.
func (p *Profile) DeepCopy() *Profile {
	if p == nil {
		return nil
	}
	out := new(Profile)
	p.DeepCopyInto(out)
	return out
}

// DeepCopyObject returns a deep copy of p as an Object.
func (p *Profile) DeepCopyObject() Object { return p.DeepCopy() }

// DeepCopyInto copies s into out.
func (s *TenantSpec) DeepCopyInto(out *TenantSpec) { *out = *s }

// DeepCopyInto copies t into out.
func (t *Tenant) DeepCopyInto(out *Tenant) {
	*out = *t
	t.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	t.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a deep copy of t.
func (t *Tenant) DeepCopy() *Tenant {
	if t == nil {
		return nil
	}
	out := new(Tenant)
	t.DeepCopyInto(out)
	return out
}

// DeepCopyObject returns a deep copy of t as an Object.
func (t *Tenant) DeepCopyObject() Object { return t.DeepCopy() }

func copyStringMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
