package launch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Spec is what one pane launch passes to herdr.
type Spec struct {
	// Args are the complete agent.start args (after the harness's
	// executable).
	Args []string
	// Env is the complete pane environment for tab.create. It may hold
	// secret values: pass it to herdr and nowhere else (String and LogValue
	// print only its keys).
	Env map[string]string
	// Plan is the resolved MCP plan for status.plan; never a secret.
	Plan []v1alpha1.PlanRow
	// Token is an opaque handle of the pane's credential, for
	// [Launcher.Bind]; "" when the launch has none.
	Token string
	// Cleanup, if set, undoes Prepare when the launch fails before the
	// pane runs (for example it revokes the minted token).
	Cleanup func() error
	// Resumed is the agent's own session this launch reopens (Args hold
	// the harness's resume command), for status.resumedSession; nil for a
	// fresh start.
	Resumed *v1alpha1.AgentSession
}

// String lists the spec without any environment value.
func (s Spec) String() string {
	return fmt.Sprintf("args=%q env=%v token=%s", s.Args, slices.Sorted(maps.Keys(s.Env)), s.Token)
}

// LogValue implements slog.LogValuer without any environment value.
func (s Spec) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("args", s.Args),
		slog.Any("envKeys", slices.Sorted(maps.Keys(s.Env))),
		slog.String("token", s.Token),
	)
}

// Launcher turns a member into a launch. An error that only a change of the
// spec or of a referenced object can fix should have a `Reason() string`
// method (e.g. *plan.Error): the member then gets Ready=False with that
// reason and is not retried until something changes. Other errors are
// retried with backoff.
type Launcher interface {
	// Prepare readies the member's next pane.
	Prepare(ctx context.Context, m *v1alpha1.Member, p *v1alpha1.Profile, tenants map[string]*v1alpha1.Tenant) (Spec, error)
	// Bind ties a prepared launch to the pane herdr created for it.
	Bind(spec Spec, paneID, terminalID string) error
	// Release is told that a pane fleetd ran was closed or replaced: it
	// revokes that pane's credential and nothing else (never another
	// pane's, even one that now carries the same pane id).
	Release(p Pane) error
	// Forget is told that a member was deleted.
	Forget(member string) error
}

// Pane names a pane fleetd ran for a member, for [Launcher.Release].
type Pane struct {
	Member     string
	PaneID     string
	TerminalID string
	// Token is the handle Spec.Token gave the pane's credential; "" for a
	// pane recorded before fleetd kept it (Release then matches the member
	// and the pane id together).
	Token string
}

// Planner is implemented by a Launcher that can resolve a member's plan rows
// without launching anything, for the status of a pane fleetd adopted
// rather than started.
type Planner interface {
	Plan(m *v1alpha1.Member, tenants map[string]*v1alpha1.Tenant) ([]v1alpha1.PlanRow, error)
}

// Resumer is implemented by a Launcher that can launch a member's agent into
// the agent's own earlier session (herdr's agent_session for the pane that
// died), so that the worker keeps its context. A reconciler asks for it only
// when the profile's spec.resume is not Never; otherwise, and with a
// Launcher that is no Resumer, it calls Prepare.
type Resumer interface {
	// PrepareResume is Prepare for a launch whose Args end with the
	// harness's resume command for session s; the Spec's Resumed is s. An
	// error wrapping [ErrCannotResume] means this session cannot be resumed
	// at all (a harness without a resume command, a transcript path, a
	// session of another agent kind, a value unsafe in argv, a profile with
	// resume: Never): nothing was prepared, and the caller starts afresh
	// with Prepare and says why. Other errors are Prepare's.
	PrepareResume(ctx context.Context, m *v1alpha1.Member, p *v1alpha1.Profile, tenants map[string]*v1alpha1.Tenant, s v1alpha1.AgentSession) (Spec, error)
}

// ErrCannotResume is wrapped by a [Resumer]'s refusal to resume a session;
// the error's text says why.
var ErrCannotResume = errors.New("cannot resume the agent's session")
