package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/launch"
	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/plan"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// Pane variables the launcher sets for every member. Profiles may not set
// them (or the tenant slot): they are fleetd's.
const (
	// TokenEnv holds the member's own fleetd token (plan.MemberTokenEnv).
	TokenEnv = plan.MemberTokenEnv
	// URLEnv holds this fleetd's gateway URL, the one TokenEnv is valid for.
	URLEnv = "FLEETD_URL"
	// MemberEnv holds the member's name.
	MemberEnv = "FLEETD_MEMBER"
)

// TokenRegistry is what the launcher needs from the token registry
// (*tokens.Registry satisfies it).
type TokenRegistry interface {
	Mint(member, memberUID string) (string, tokens.ID, error)
	Bind(id tokens.ID, paneID, terminalID string) error
	Revoke(id tokens.ID) error
	RevokeMemberPane(member, paneID string) int
	RevokeMember(name string) int
}

// LauncherOptions configure a [Launcher].
type LauncherOptions struct {
	// StateDir is fleetd's state directory, absolute; config files go in
	// the member's harness directory package statedir names
	// (StateDir/harness/MEMBER/). Required.
	StateDir string
	// Gateway is this fleetd's own MCP endpoint. Required.
	Gateway plan.Gateway
	// Tokens mints and revokes member tokens. Required.
	Tokens TokenRegistry
	// Executable is the absolute path of fleetd for command-bridge entries;
	// empty means os.Executable().
	Executable string
	// LookupEnv reads fleetd's environment for tenant credentials; nil
	// means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Launcher turns a member into what the reconciler passes to herdr: it
// resolves the plan, renders the harness adapter, writes its config files,
// mints the member's token and assembles the pane environment.
type Launcher struct {
	state      statedir.Layout
	gateway    plan.Gateway
	tokens     TokenRegistry
	executable string
	lookupEnv  func(string) (string, bool)
}

// NewLauncher checks opts and returns a Launcher.
func NewLauncher(opts LauncherOptions) (*Launcher, error) {
	if !filepath.IsAbs(opts.StateDir) {
		return nil, fmt.Errorf("new launcher: state directory %q is not absolute", opts.StateDir)
	}
	if opts.Gateway.URL == "" {
		return nil, errors.New("new launcher: no gateway URL")
	}
	if opts.Tokens == nil {
		return nil, errors.New("new launcher: no token registry")
	}
	l := &Launcher{state: statedir.At(opts.StateDir), gateway: opts.Gateway, tokens: opts.Tokens, executable: opts.Executable, lookupEnv: opts.LookupEnv}
	if l.executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("new launcher: locate fleetd executable: %w", err)
		}
		l.executable = exe
	}
	if l.lookupEnv == nil {
		l.lookupEnv = os.LookupEnv
	}
	return l, nil
}

// Launcher implements the reconciler's launch contract directly.
var (
	_ launch.Launcher = (*Launcher)(nil)
	_ launch.Planner  = (*Launcher)(nil)
	_ launch.Resumer  = (*Launcher)(nil)
)

// Plan resolves member m's plan rows without launching anything, e.g. for
// status of an adopted pane. Errors carry Reason() as in package plan.
func (l *Launcher) Plan(m *v1alpha1.Member, tenants map[string]*v1alpha1.Tenant) ([]v1alpha1.PlanRow, error) {
	return plan.Resolve(m, tenants, l.gateway, l.lookupEnv)
}

// Prepare readies member m's next pane: it resolves the plan, renders the
// profile's harness adapter, writes the adapter's config files (0600) and
// mints a fresh token. The spec's Args are the profile's args followed by the
// adapter's; its Env is the profile's env over the adapter's, plus
// FLEETD_TOKEN / FLEETD_URL / FLEETD_MEMBER and, for tenant members, the
// tenant credential slot; its Token is the minted token's [tokens.ID]. Its
// Cleanup revokes that token: call it when the launch fails (tab.create or
// agent.start) and the pane will not run. After tab.create succeeds call
// [Launcher.Bind] with the spec. It is a fresh start: its Resumed is nil.
//
// An error that a spec or referenced object must fix — unknown tenant,
// missing credential, reserved variables in the profile — has a Reason()
// method (v1alpha1.ReasonTenantNotFound, v1alpha1.ReasonCredentialMissing,
// v1alpha1.ReasonInvalidSpec); other errors (disk, randomness) are transient.
func (l *Launcher) Prepare(ctx context.Context, m *v1alpha1.Member, p *v1alpha1.Profile, tenants map[string]*v1alpha1.Tenant) (launch.Spec, error) {
	return l.prepare(ctx, m, p, tenants, nil)
}

// PrepareResume is [Launcher.Prepare] for a launch that reopens the agent's
// own session s: the spec's Args end with the harness's resume command
// ([ResumeArgs]: Claude Code `--resume ID`, Codex `resume ID`) and its
// Resumed is s. A session that cannot be resumed — the profile says resume:
// Never, or [ResumeArgs] refuses it — is refused with an error wrapping
// launch.ErrCannotResume before anything is written or minted.
func (l *Launcher) PrepareResume(ctx context.Context, m *v1alpha1.Member, p *v1alpha1.Profile, tenants map[string]*v1alpha1.Tenant, s v1alpha1.AgentSession) (launch.Spec, error) {
	return l.prepare(ctx, m, p, tenants, &s)
}

func (l *Launcher) prepare(ctx context.Context, m *v1alpha1.Member, p *v1alpha1.Profile, tenants map[string]*v1alpha1.Tenant, resume *v1alpha1.AgentSession) (launch.Spec, error) {
	if err := ctx.Err(); err != nil {
		return launch.Spec{}, err
	}
	if m == nil || p == nil {
		return launch.Spec{}, plan.Errorf(v1alpha1.ReasonInvalidSpec, "prepare launch: member and profile are required")
	}
	var resumeArgs []string
	if resume != nil {
		if p.Spec.Resume == v1alpha1.ResumeNever {
			return launch.Spec{}, fmt.Errorf("member %q: %w: profile %q has resume: Never", m.Name, launch.ErrCannotResume, p.Name)
		}
		var err error
		if resumeArgs, err = ResumeArgs(p.Spec.Harness, *resume); err != nil {
			return launch.Spec{}, fmt.Errorf("member %q: %w", m.Name, err)
		}
	}
	if !safeDirName(m.Name) {
		return launch.Spec{}, plan.Errorf(v1alpha1.ReasonInvalidSpec, "member %q: name cannot name a directory", m.Name)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Spec.Env)) {
		if reserved(k) {
			return launch.Spec{}, plan.Errorf(v1alpha1.ReasonInvalidSpec, "profile %q: spec.env.%s is set by fleetd and may not be set in a profile", p.Name, k)
		}
	}
	rows, err := plan.Resolve(m, tenants, l.gateway, l.lookupEnv)
	if err != nil {
		return launch.Spec{}, err
	}
	credSource, err := plan.TenantCredentialSource(m, tenants, l.lookupEnv)
	if err != nil {
		return launch.Spec{}, err
	}
	dir := l.configDir(m.Name)
	r, err := For(p.Spec.Harness).Render(Input{
		Rows: rows, ToolTimeout: p.Spec.ToolTimeout.Duration, ConfigDir: dir, Executable: l.executable,
	})
	if err != nil {
		return launch.Spec{}, fmt.Errorf("member %q: %w", m.Name, err)
	}
	if err := writeFiles(dir, r.Files); err != nil {
		return launch.Spec{}, fmt.Errorf("member %q: %w", m.Name, err)
	}

	env := make(map[string]string, len(p.Spec.Env)+len(r.Env)+4)
	maps.Copy(env, r.Env)
	maps.Copy(env, p.Spec.Env) // the operator's profile overrides adapter defaults
	if credSource != "" {
		cred, _ := l.lookupEnv(credSource) // presence checked by plan.Resolve
		env[plan.TenantTokenEnv] = cred
	}
	tok, id, err := l.tokens.Mint(m.Name, m.UID)
	if err != nil {
		return launch.Spec{}, fmt.Errorf("member %q: %w", m.Name, err)
	}
	env[TokenEnv] = tok
	env[URLEnv] = l.gateway.URL
	env[MemberEnv] = m.Name

	return launch.Spec{
		Args:    slices.Concat(p.Spec.Args, r.Args, resumeArgs),
		Env:     env,
		Plan:    rows,
		Token:   string(id),
		Cleanup: func() error { return l.tokens.Revoke(id) },
		Resumed: resume,
	}, nil
}

// Bind ties the prepared spec's token to the pane herdr created for it.
func (l *Launcher) Bind(spec launch.Spec, paneID, terminalID string) error {
	return l.tokens.Bind(tokens.ID(spec.Token), paneID, terminalID)
}

// Release revokes the token of a pane that was closed or replaced: the one
// its launch was given when the controllers recorded it, else the member's
// tokens bound to that pane id. A pane id that herdr gave another member's
// pane since (after a restart) never revokes that member's token.
func (l *Launcher) Release(p launch.Pane) error {
	if p.Token != "" {
		return l.tokens.Revoke(tokens.ID(p.Token))
	}
	l.tokens.RevokeMemberPane(p.Member, p.PaneID)
	return nil
}

// Forget revokes every token of a deleted member and removes its config
// files.
func (l *Launcher) Forget(member string) error {
	l.tokens.RevokeMember(member)
	if safeDirName(member) {
		if err := os.RemoveAll(l.configDir(member)); err != nil {
			return fmt.Errorf("forget member %q: %w", member, err)
		}
	}
	return nil
}

func (l *Launcher) configDir(member string) string {
	return l.state.Harness(member)
}

// reserved reports whether a profile may not set the pane variable k.
func reserved(k string) bool {
	switch k {
	case TokenEnv, URLEnv, MemberEnv, plan.TenantTokenEnv, ConfigPathEnv:
		return true
	}
	return false
}

func safeDirName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && !strings.ContainsRune(name, 0)
}

// writeFiles writes each file (which must lie in dir) with the state
// directory's file mode (0600), creating dir with its directory mode (0700).
func writeFiles(dir string, files []File) error {
	if len(files) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, statedir.DirMode); err != nil {
		return fmt.Errorf("write harness config: %w", err)
	}
	for _, f := range files {
		if filepath.Dir(f.Path) != dir {
			return fmt.Errorf("write harness config: %s is outside %s", f.Path, dir)
		}
		if unchanged(f) {
			continue // a relaunch's config, as the last launch wrote it: no write, no fsync
		}
		if err := atomicfile.Write(f.Path, f.Data, statedir.FileMode); err != nil {
			return fmt.Errorf("write harness config: %w", err)
		}
	}
	return nil
}

// unchanged reports whether f's file holds f's data already: a regular
// file of the state directory's mode and f's size, with f's bytes.
func unchanged(f File) bool {
	fi, err := os.Lstat(f.Path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != statedir.FileMode || fi.Size() != int64(len(f.Data)) {
		return false
	}
	data, err := os.ReadFile(f.Path)
	return err == nil && bytes.Equal(data, f.Data)
}
