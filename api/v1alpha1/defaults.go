package v1alpha1

import "time"

// Default values SetDefaults fills in.
const (
	DefaultTransport      = TransportStreamableHTTP
	DefaultRestartPolicy  = RestartAlways
	DefaultResume         = ResumeAuto
	DefaultStartupTimeout = 60 * time.Second
	DefaultToolTimeout    = 15 * time.Minute
	// DefaultTerminationGracePeriod is a Profile's
	// spec.terminationGracePeriod when it sets none.
	DefaultTerminationGracePeriod = 10 * time.Minute
)

// SetDefaults fills the fields an operator may leave out: mcpTarget absent
// means {kind: resident}, transport empty means streamable-http, workspace
// empty means "fleetd" and a worktree's cleanup empty means Never. It never overwrites a value that is set, so calling
// it twice changes nothing the second time.
func (m *Member) SetDefaults() {
	if m.Spec.MCPTarget == nil {
		m.Spec.MCPTarget = &MCPTarget{Kind: TargetResident}
	}
	if m.Spec.Transport == "" {
		m.Spec.Transport = DefaultTransport
	}
	if m.Spec.Workspace == "" {
		m.Spec.Workspace = DefaultWorkspace
	}
	if w := m.Spec.Worktree; w != nil && w.Cleanup == "" {
		w.Cleanup = CleanupNever
	}
}

// SetDefaults fills restartPolicy (Always), startupTimeout (60s),
// toolTimeout (15m), resume (Auto) and terminationGracePeriod (10m) when
// they are empty or zero, and a worktree setting's branchPrefix (fleetd)
// and cleanup (Never) when it names a repository.
func (p *Profile) SetDefaults() {
	if p.Spec.RestartPolicy == "" {
		p.Spec.RestartPolicy = DefaultRestartPolicy
	}
	if p.Spec.Resume == "" {
		p.Spec.Resume = DefaultResume
	}
	if p.Spec.StartupTimeout.Duration == 0 {
		p.Spec.StartupTimeout.Duration = DefaultStartupTimeout
	}
	if p.Spec.ToolTimeout.Duration == 0 {
		p.Spec.ToolTimeout.Duration = DefaultToolTimeout
	}
	if p.Spec.TerminationGracePeriod.Duration == 0 {
		p.Spec.TerminationGracePeriod.Duration = DefaultTerminationGracePeriod
	}
	if w := p.Spec.Worktree; w != nil && w.Repo != "" {
		if w.BranchPrefix == "" {
			w.BranchPrefix = DefaultBranchPrefix
		}
		if w.Cleanup == "" {
			w.Cleanup = CleanupNever
		}
	}
}

// SetDefaults does nothing: every Tenant field is required. It exists so
// all three kinds can be treated alike.
func (t *Tenant) SetDefaults() {}
