package v1alpha1

import "time"

// GroupVersion is the apiVersion every fleetd object carries.
const GroupVersion = "fleetd.dev/v1alpha1"

// Kinds of object fleetd understands.
const (
	KindMember  = "Member"
	KindProfile = "Profile"
	KindTenant  = "Tenant"
)

// New returns an empty object of kind (a Member, Profile or Tenant), for
// a decoder to fill; nil for any other kind.
func New(kind string) Object {
	switch kind {
	case KindMember:
		return &Member{}
	case KindProfile:
		return &Profile{}
	case KindTenant:
		return &Tenant{}
	}
	return nil
}

// TypeMeta names an object's schema, as in Kubernetes.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// ObjectMeta is the Kubernetes-style metadata every object carries. Name is
// set by the operator; UID, Generation and CreationTimestamp are fleetd's.
type ObjectMeta struct {
	Name              string            `json:"name"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	UID               string            `json:"uid,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp *time.Time        `json:"creationTimestamp,omitempty"`
	// ResourceVersion is the version of the stored object, as Kubernetes
	// has it: the etcd store sets it to the object's mod revision; the
	// directory store leaves it empty. Set on a write, it is a
	// precondition: the write fails with a conflict unless the stored
	// object still has this version.
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Object is implemented by Member, Profile and Tenant.
type Object interface {
	GetObjectKind() string
	GetName() string
	GetMeta() *ObjectMeta
}

// Target kinds for MCPTarget.Kind.
const (
	TargetResident = "resident"
	TargetTenant   = "tenant"
)

// Canonical wire transports: the only two values spec.transport and plan
// rows ever carry.
const (
	TransportStdio          = "stdio"
	TransportStreamableHTTP = "streamable-http"
)

// DefaultWorkspace is the herdr workspace label members land in when their
// spec names none.
const DefaultWorkspace = "fleetd"

// MCPTarget selects which fleetd gateway a member's MCP client talks to.
type MCPTarget struct {
	// Kind is resident (this host's fleetd) or tenant.
	Kind string `json:"kind"`
	// TenantID names a Tenant; required iff Kind is tenant.
	TenantID string `json:"tenantId,omitempty"`
}

// Member is one agent worker: a herdr agent in its own tab, connected to a
// fleetd gateway.
type Member struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       MemberSpec   `json:"spec"`
	Status     MemberStatus `json:"status,omitzero"`
}

// MemberSpec is the operator's public intent for a member. It is a closed
// shape: references and choices only, never a URL, credential, header,
// command, argv or environment.
type MemberSpec struct {
	// Profile names the Profile that says how to launch the agent.
	Profile string `json:"profile"`
	// MCPTarget selects the gateway; nil means {kind: resident}.
	MCPTarget *MCPTarget `json:"mcpTarget,omitempty"`
	// Transport is stdio or streamable-http; empty means streamable-http.
	Transport string `json:"transport,omitempty"`
	// Workspace is the herdr workspace label; empty means "fleetd".
	Workspace string `json:"workspace,omitempty"`
	// Cwd is an absolute working directory overriding the profile's.
	Cwd string `json:"cwd,omitempty"`
	// Prompt is a first task, delivered once when the member is first Ready.
	Prompt string `json:"prompt,omitempty"`
	// Paused keeps the object but closes the pane.
	Paused bool `json:"paused,omitempty"`
	// NodeName pins the member to one node of a fleet on etcd (`fleetd
	// serve --store etcd`), as in Kubernetes: the scheduler places it there
	// only. Unused by the directory store, whose one machine is the fleet.
	NodeName string `json:"nodeName,omitempty"`
	// NodeSelector places the member only on a node whose labels hold
	// every pair, as in Kubernetes. Unused by the directory store.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Worktree makes the member work in a git worktree of its own (see
	// [MemberWorktree]); it excludes Cwd. A member without it gets its
	// profile's (see [Member.WorktreeOf]) unless it sets Cwd.
	Worktree *MemberWorktree `json:"worktree,omitempty"`
	// TerminationGracePeriod bounds how long a member that is deleted,
	// stopped or paused keeps its tab while its agent is busy (a turn
	// open, a message queued, a question held): the tab closes when the
	// agent is idle with nothing open, or when this much time has passed.
	// nil: the Profile's spec.terminationGracePeriod.
	TerminationGracePeriod *Duration `json:"terminationGracePeriod,omitempty"`
	// UpdateStrategy says how a spec change that needs a new agent is
	// rolled out to the running one; nil waits for idle, however long.
	UpdateStrategy *UpdateStrategy `json:"updateStrategy,omitempty"`
}

// UpdateStrategy says how a running member takes a spec change that needs
// a new agent: the old agent is replaced at its next idle moment (no turn
// open, nothing queued, no question held), never in the middle of a turn,
// unless MaxWait passed.
type UpdateStrategy struct {
	// MaxWait bounds the wait for an idle moment: once the change has
	// waited this long the agent is replaced whatever it is doing. nil
	// waits forever.
	MaxWait *Duration `json:"maxWait,omitempty"`
}

// Member phases.
const (
	PhasePending     = "Pending"
	PhaseStarting    = "Starting"
	PhaseReady       = "Ready"
	PhaseDegraded    = "Degraded"
	PhaseFailed      = "Failed"
	PhasePaused      = "Paused"
	PhaseTerminating = "Terminating"
)

// PlanRow is one resolved MCP server connection for a member. It never holds
// a secret value: CredentialEnv is the *name* of the slot variable.
type PlanRow struct {
	Server        string `json:"server"`
	Target        string `json:"target"`
	Transport     string `json:"transport"`
	URL           string `json:"url,omitempty"`
	CredentialEnv string `json:"credentialEnv,omitempty"`
}

// AgentSession points at an agent's own session record — its conversation,
// which the harness can reopen — as herdr reports it (agent_session): the
// integration that reported it, the agent kind it belongs to, whether Value
// is a session id or a transcript path, and the value. It is the harness's
// session, not fleetd's (MemberStatus.SessionID), and never a secret.
type AgentSession struct {
	Source string `json:"source,omitempty"`
	Agent  string `json:"agent"`
	Kind   string `json:"kind"`
	Value  string `json:"value"`
}

// Kinds of AgentSession.Value, herdr's agent_session kinds.
const (
	AgentSessionKindID   = "id"
	AgentSessionKindPath = "path"
)

// MemberStatus is written by fleetd, never into the operator's file.
type MemberStatus struct {
	Phase      string      `json:"phase,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
	// NodeName is the node the member is placed on (fleets on etcd).
	NodeName           string    `json:"nodeName,omitempty"`
	ObservedGeneration int64     `json:"observedGeneration,omitempty"`
	SessionID          string    `json:"sessionId,omitempty"`
	PaneID             string    `json:"paneId,omitempty"`
	TerminalID         string    `json:"terminalId,omitempty"`
	WorkspaceID        string    `json:"workspaceId,omitempty"`
	TabID              string    `json:"tabId,omitempty"`
	AgentStatus        string    `json:"agentStatus,omitempty"`
	Restarts           int32     `json:"restarts,omitempty"`
	LastError          string    `json:"lastError,omitempty"`
	Plan               []PlanRow `json:"plan,omitempty"`
	// ResumedSession is the agent's own session the current pane was
	// launched to resume (the harness's resume command); nil for a fresh
	// start.
	ResumedSession *AgentSession `json:"resumedSession,omitempty"`
	// Worktree is the member's git worktree as last read; nil for a
	// member without one, or before it was first made.
	Worktree *WorktreeStatus `json:"worktree,omitempty"`
	// Rollout names the Profile whose rollout is replacing the member's
	// agent now — admitted, waiting for the agent to be idle, or its new
	// agent not Ready yet — so that every node of a fleet counts it
	// against that rollout's spec.rollout.maxUnavailable; "" otherwise.
	Rollout string `json:"rollout,omitempty"`
	// ProfileTarget is a digest of what the running agent's launch took
	// from its Profile (internal/rollout's Target), "" when no agent runs:
	// a node counts a member another node runs as updated by its profile's
	// rollout only when this is the profile's current one.
	ProfileTarget string `json:"profileTarget,omitempty"`
}

// Profile says how to launch a kind of agent. Operator-owned: the only
// place worker environment may come from.
type Profile struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       ProfileSpec `json:"spec"`
	// Status is the profile's rollout to its members, written by fleetd
	// (computed when read), never into the operator's file.
	Status ProfileStatus `json:"status,omitzero"`
}

// Restart policies.
const (
	RestartAlways    = "Always"
	RestartOnFailure = "OnFailure"
	RestartNever     = "Never"
)

// ProfileSpec describes a harness launch.
type ProfileSpec struct {
	// Harness is a herdr agent kind: claude, codex, gemini, opencode, qwen, …
	Harness string `json:"harness"`
	// Description is shown to models by bridge_profiles.
	Description string `json:"description,omitempty"`
	// Args are passed after the harness's own executable.
	Args []string `json:"args,omitempty"`
	// Env is operator-owned environment for the worker pane.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the default working directory (absolute).
	Cwd string `json:"cwd,omitempty"`
	// StartupTimeout is the agent.start readiness deadline (>3s, ≤300s).
	StartupTimeout Duration `json:"startupTimeout,omitzero"`
	// RestartPolicy is Always, OnFailure or Never; default Always.
	RestartPolicy string `json:"restartPolicy,omitempty"`
	// ToolTimeout is the harness's MCP tool-call timeout set by the adapter.
	ToolTimeout Duration `json:"toolTimeout,omitzero"`
	// Resume is Auto or Never; default Auto. Auto: every relaunch of a
	// member's agent — after a crash, a spec change, a pause, a fleetd
	// restart or a move to another node — reopens the agent's own earlier
	// session when herdr reported one (agent_session), the harness is the
	// same and has a resume command; Never: every relaunch is a fresh
	// start.
	Resume string `json:"resume,omitempty"`
	// Worktree gives the profile's members worktrees of one repository,
	// and says whether herdr may trust it (see [ProfileWorktree]).
	Worktree *ProfileWorktree `json:"worktree,omitempty"`
	// TerminationGracePeriod is its members' default
	// spec.terminationGracePeriod; default 10m.
	TerminationGracePeriod Duration `json:"terminationGracePeriod,omitzero"`
	// Rollout says how a change of the profile reaches its running
	// members (see [ProfileRollout]); nil: one member at a time.
	Rollout *ProfileRollout `json:"rollout,omitempty"`
}

// Resume policies for ProfileSpec.Resume.
const (
	ResumeAuto  = "Auto"
	ResumeNever = "Never"
)

// Tenant is a connected tenant's gateway.
type Tenant struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       TenantSpec `json:"spec"`
}

// TenantSpec holds a tenant gateway's URL and the name of the environment
// variable holding its credential — never the credential itself.
type TenantSpec struct {
	URL           string `json:"url"`
	CredentialEnv string `json:"credentialEnv"`
}

// GetObjectKind returns "Member".
func (m *Member) GetObjectKind() string { return KindMember }

// GetName returns metadata.name.
func (m *Member) GetName() string { return m.Name }

// GetMeta returns the object's metadata.
func (m *Member) GetMeta() *ObjectMeta { return &m.ObjectMeta }

// GetObjectKind returns "Profile".
func (p *Profile) GetObjectKind() string { return KindProfile }

// GetName returns metadata.name.
func (p *Profile) GetName() string { return p.Name }

// GetMeta returns the object's metadata.
func (p *Profile) GetMeta() *ObjectMeta { return &p.ObjectMeta }

// GetObjectKind returns "Tenant".
func (t *Tenant) GetObjectKind() string { return KindTenant }

// GetName returns metadata.name.
func (t *Tenant) GetName() string { return t.Name }

// GetMeta returns the object's metadata.
func (t *Tenant) GetMeta() *ObjectMeta { return &t.ObjectMeta }
