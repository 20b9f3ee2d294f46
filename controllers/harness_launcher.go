package controllers

import (
	"context"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// HarnessLauncher adapts the harness adapters' launcher (MCP plan, harness
// config files, per-pane token) to the Launcher the controllers use.
func HarnessLauncher(l *harness.Launcher) Launcher { return harnessLauncher{l} }

type harnessLauncher struct{ l *harness.Launcher }

func (h harnessLauncher) Prepare(ctx context.Context, m *v1alpha1.Member, p *v1alpha1.Profile, tenants map[string]*v1alpha1.Tenant) (LaunchSpec, error) {
	spec, cleanup, err := h.l.Prepare(ctx, m, p, tenants)
	if err != nil {
		return LaunchSpec{}, err
	}
	return LaunchSpec{Args: spec.Args, Env: spec.Env, Plan: spec.Plan, Token: string(spec.Token), Cleanup: cleanup}, nil
}

func (h harnessLauncher) Bind(spec LaunchSpec, paneID, terminalID string) error {
	return h.l.Bind(tokens.ID(spec.Token), paneID, terminalID)
}

func (h harnessLauncher) Release(paneID string) error { return h.l.Release(paneID) }
func (h harnessLauncher) Forget(member string) error  { return h.l.Forget(member) }

// Plan resolves an adopted member's plan rows for its status.
func (h harnessLauncher) Plan(m *v1alpha1.Member, tenants map[string]*v1alpha1.Tenant) ([]v1alpha1.PlanRow, error) {
	return h.l.Plan(m, tenants)
}
