package mcp

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/guard"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// DesiredState is the declared fleet that bridge_spawn, bridge_stop,
// bridge_profiles, POST and DELETE /members read and write through. fleetd
// passes the controllers' store (controllers.Manager.Store()); this package
// never imports it.
type DesiredState interface {
	// Get returns one object by kind and name.
	Get(kind, name string) (v1alpha1.Object, bool)
	// List returns every object of one kind.
	List(kind string) []v1alpha1.Object
	// Apply creates or replaces obj's definition; a decode.ErrorList in
	// its error says what in obj is invalid, and an error matching
	// store.ErrConflict that obj's metadata.resourceVersion is stale.
	Apply(ctx context.Context, obj v1alpha1.Object) error
	// Delete removes the object's definition; for an object that has none
	// it returns an error matching store.ErrNotFound.
	Delete(ctx context.Context, kind, name string) error
}

// applyChecker is a DesiredState that can make every check of an Apply
// without writing (internal/store's directory: CheckApply), for dry
// runs; a store without it is checked only as far as this package can.
type applyChecker interface {
	CheckApply(ctx context.Context, obj v1alpha1.Object) error
}

// Expediter ends a member's wait for its agent to be idle at once: the
// tab of a deleted member whose agent is busy closes now
// (controllers.Manager.Expedite). It reports whether the member was
// waiting; it must not block.
type Expediter interface {
	Expedite(member string) bool
}

// MemberWaiter wakes on every change of the members' status
// (controllers.Manager).
type MemberWaiter interface {
	WaitFor(ctx context.Context, cond func([]v1alpha1.Member) bool) error
}

// remoteStops is a MemberWaiter that sees a fleet of nodes (internal/fleet's
// View): a stop of a member another node runs waits on it for that node's
// report, since the pane closes there and is never reported here.
type remoteStops interface {
	// WaitStopped returns once m's node (m.Status.NodeName) reports it no
	// longer runs m, or an error when ctx ends first.
	WaitStopped(ctx context.Context, m v1alpha1.Member) error
}

// Defaults of the member writes.
const (
	DefaultSpawnTimeout = 2 * time.Minute
	DefaultStopTimeout  = 30 * time.Second
	DefaultMaxBodyBytes = 1 << 20
)

// MemberView is how tools and REST writes show one member.
type MemberView struct {
	Name        string `json:"name" jsonschema:"the member's name (also its herdr agent name)"`
	SessionID   string `json:"sessionId,omitempty" jsonschema:"stable session UUID of the member"`
	TerminalID  string `json:"terminalId,omitempty" jsonschema:"herdr terminal id of its pane"`
	PaneID      string `json:"paneId,omitempty" jsonschema:"herdr pane id"`
	Profile     string `json:"profile" jsonschema:"the Profile it runs"`
	Phase       string `json:"phase" jsonschema:"Pending, Starting, Ready, Degraded, Failed, Paused or Terminating"`
	AgentStatus string `json:"agentStatus,omitempty" jsonschema:"herdr's agent status: idle, working, blocked, done or unknown"`
	LastError   string `json:"lastError,omitempty" jsonschema:"the last error, when it is not Ready"`
}

func viewOf(m v1alpha1.Member) MemberView {
	return MemberView{Name: m.Name, SessionID: m.Status.SessionID, TerminalID: m.Status.TerminalID,
		PaneID: m.Status.PaneID, Profile: m.Spec.Profile, Phase: m.Status.Phase,
		AgentStatus: m.Status.AgentStatus, LastError: m.Status.LastError}
}

// Results of a member write, kubectl-style.
const (
	resultCreated    = "created"
	resultConfigured = "configured"
	resultUnchanged  = "unchanged"
	resultDeleted    = "deleted"
)

// spawnRequest is a decoded, checked spawn: the Member to apply and how to
// wait for it.
type spawnRequest struct {
	member  *v1alpha1.Member
	wait    bool
	timeout time.Duration
	dryRun  bool // check and answer, but write nothing and wait for nothing
	rest    bool // POST /members: hints name fleetd's commands, not the tools
}

// spawnArgs are bridge_spawn's arguments, which a POST /members body may
// also be: the JSON names of [SpawnInput], the one list (its schema is the
// tool's input schema too). name is the Member's metadata.name and wait
// and timeoutMs are about the call ([spawnCallArgs]); every other one is
// the spec field of the same name. A test checks them against MemberSpec's
// fields and the fields spawn deliberately leaves out.
var spawnArgs = jsonNames(reflect.TypeFor[SpawnInput]())

// spawnCallArgs are the bridge_spawn arguments that are not spec fields.
var spawnCallArgs = []string{"name", "wait", "timeoutMs"}

// jsonNames returns the JSON names of struct type t's fields, in order.
func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// spawnArgsText lists the arguments for an error: "a, b and c".
func spawnArgsText() string {
	return strings.Join(spawnArgs[:len(spawnArgs)-1], ", ") + " and " + spawnArgs[len(spawnArgs)-1]
}

// decodeSpawnArgs checks bridge_spawn arguments as they arrived (the JSON
// of the tool call, or of a POST /members body in that shape) and turns
// them into a Member: the subscription guard first, on the raw bytes — every
// key and value as sent, duplicate keys refused — then the closed shape and
// the fields bridge_spawn knows, then strict decoding and validation of the
// Member.
func decodeSpawnArgs(data []byte) (spawnRequest, error) {
	raw := map[string]any{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &raw); err != nil {
			return spawnRequest{}, toolErr(codeInvalidArgument, "arguments: %v", err)
		}
		if err := guard.CheckSpawnJSON(data); err != nil {
			return spawnRequest{}, boundaryErr(err)
		}
	}
	if raw == nil { // the arguments were null
		raw = map[string]any{}
	}
	return spawnFromArgs(raw)
}

// spawnFromArgs turns bridge_spawn arguments the guard has passed into a
// Member.
func spawnFromArgs(raw map[string]any) (spawnRequest, error) {
	var extra []string
	for k := range raw {
		if !slices.Contains(spawnArgs, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		rest := map[string]any{}
		for _, k := range extra {
			rest[k] = raw[k]
		}
		if errs := decode.CheckClosedMemberSpec("", rest); len(errs) > 0 {
			return spawnRequest{}, specErr(errs)
		}
		return spawnRequest{}, toolErr(codeInvalidSpec, "%s: unknown field; bridge_spawn takes %s", extra[0], spawnArgsText())
	}
	req := spawnRequest{wait: true}
	if w, ok := raw["wait"]; ok {
		b, isBool := w.(bool)
		if !isBool {
			return spawnRequest{}, toolErr(codeInvalidArgument, "wait: want true or false")
		}
		req.wait = b
	}
	if t, ok := raw["timeoutMs"]; ok {
		ms, isNum := toInt(t)
		if !isNum {
			return spawnRequest{}, toolErr(codeInvalidArgument, "timeoutMs: want a whole number of milliseconds from 0 to %d", MaxTimeout.Milliseconds())
		}
		timeout, err := timeoutArg(ms)
		if err != nil {
			return spawnRequest{}, err
		}
		req.timeout = timeout
	}
	name, _ := raw["name"].(string)
	if _, ok := raw["name"]; ok && name == "" {
		return spawnRequest{}, toolErr(codeInvalidSpec, "name: want a member name like %s, or leave it out", v1alpha1.MemberNamePattern)
	}
	if name == "" {
		profile, _ := raw["profile"].(string)
		name = generatedName(profile)
	}
	spec := map[string]any{}
	for _, k := range spawnArgs {
		if v, ok := raw[k]; ok && !slices.Contains(spawnCallArgs, k) {
			spec[k] = v
		}
	}
	doc := map[string]any{"apiVersion": v1alpha1.GroupVersion, "kind": v1alpha1.KindMember,
		"metadata": map[string]any{"name": name}, "spec": spec}
	data, err := json.Marshal(doc)
	if err != nil {
		return spawnRequest{}, toolErr(codeInvalidArgument, "encode spawn: %v", err)
	}
	m, err := decodeMember("", data)
	if err != nil {
		return spawnRequest{}, err
	}
	req.member = m
	return req, nil
}

// decodeMemberBody checks a POST /members body: a Member (YAML or JSON) or
// bridge_spawn arguments (a JSON or YAML object without kind). The guard
// reads a JSON body as sent, duplicate keys included; a YAML body becomes
// JSON first, strictly, so that a duplicate key there is refused too.
func decodeMemberBody(body []byte) (spawnRequest, error) {
	isJSON := json.Valid(body)
	if isJSON {
		if err := guard.CheckSpawnJSON(body); err != nil {
			return spawnRequest{}, boundaryErr(err)
		}
	}
	data, err := sigsyaml.YAMLToJSONStrict(body)
	if err != nil {
		return spawnRequest{}, toolErr(codeInvalidSpec, "request body: %v", err)
	}
	if !isJSON {
		if err := guard.CheckSpawnJSON(data); err != nil {
			return spawnRequest{}, boundaryErr(err)
		}
	}
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return spawnRequest{}, toolErr(codeInvalidSpec, "request body: want one Member object or bridge_spawn arguments")
	}
	if _, ok := raw["kind"]; !ok {
		// Over REST nothing waits unless asked to (here or with ?wait=true).
		req, err := spawnFromArgs(raw)
		req.wait, req.rest = raw["wait"] == true, true
		return req, err
	}
	m, err := decodeMember("request body", body)
	if err != nil {
		return spawnRequest{}, err
	}
	return spawnRequest{member: m, wait: false, rest: true}, nil
}

// decodeMember decodes exactly one Member strictly (closed shape, unknown
// fields, validation), with defaults.
func decodeMember(file string, data []byte) (*v1alpha1.Member, error) {
	m, err := decode.Member(file, data)
	if err != nil {
		var errs decode.ErrorList
		if errors.As(err, &errs) {
			return nil, specErr(errs)
		}
		return nil, toolErr(codeInvalidSpec, "%v", err)
	}
	return m, nil
}

func boundaryErr(err error) error {
	var be *guard.BoundaryError
	if errors.As(err, &be) {
		return &ToolError{Code: codeSubscriptionBoundary, Message: strings.TrimPrefix(be.Error(), guard.Code+": ")}
	}
	return toolErr(codeInvalidSpec, "%v", err)
}

func specErr(errs decode.ErrorList) error {
	return &ToolError{Code: codeInvalidSpec, Message: strings.ReplaceAll(errs.Error(), "\n", "; ")}
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		return int64(n), n == float64(int64(n))
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

var nameUnsafe = regexp.MustCompile(`[^a-z0-9_-]+`)

// generatedName makes a fresh member name from a profile name.
func generatedName(profile string) string {
	base := nameUnsafe.ReplaceAllString(strings.ToLower(profile), "-")
	base = strings.Trim(base, "-_")
	if base == "" || base[0] < 'a' || base[0] > 'z' {
		base = "w" + base
	}
	if len(base) > 24 {
		base = base[:24]
	}
	var b [3]byte
	rand.Read(b[:])
	return base + "-" + hex.EncodeToString(b[:])
}

// members carries out member writes for tools and REST alike.
type members struct {
	source    MemberSource
	store     DesiredState
	waiter    MemberWaiter
	expediter Expediter // nil: stops cannot be forced
	node      string    // this node's name in a fleet on etcd; "" for one machine
	gone      *paneGone
}

// apply checks references, writes the Member and, with wait, returns once
// it is Ready, has failed for good, or the timeout passed. A dry run stops
// before the write, with the result the write would have.
func (ms *members) apply(ctx context.Context, req spawnRequest) (MemberView, string, error) {
	if ms.store == nil {
		return MemberView{}, "", toolErr(codeUnavailable, "this gateway has no desired-state store")
	}
	m := req.member
	for _, ref := range m.References() {
		if _, ok := ms.store.Get(ref.Kind, ref.Name); ok {
			continue
		}
		hint := ""
		switch {
		case ref.Kind == v1alpha1.KindProfile && req.rest:
			hint = "; `fleetd get profiles` lists the operator's profiles"
		case ref.Kind == v1alpha1.KindProfile:
			hint = "; bridge_profiles lists the operator's profiles"
		case req.rest:
			hint = "; `fleetd get tenants` lists the operator's tenants"
		}
		return MemberView{}, "", toolErr(codeInvalidSpec, "%s: no %s named %q%s", ref.Field, ref.Kind, ref.Name, hint)
	}
	if err := ms.worktreeFree(m); err != nil {
		return MemberView{}, "", err
	}
	result := resultCreated
	if obj, ok := ms.store.Get(v1alpha1.KindMember, m.Name); ok {
		result = resultConfigured
		if sameDefinition(m, obj) {
			result = resultUnchanged
		}
	}
	if req.dryRun {
		if c, ok := ms.store.(applyChecker); ok && result != resultUnchanged {
			if err := c.CheckApply(ctx, m); err != nil {
				return MemberView{}, "", writeErr("member "+m.Name, err)
			}
		}
		view := MemberView{Name: m.Name, Profile: m.Spec.Profile}
		if cur, ok := ms.source.Member(m.Name); ok {
			view = viewOf(cur)
			view.Profile = m.Spec.Profile
		}
		return view, result, nil
	}
	if result != resultUnchanged {
		if err := ms.store.Apply(ctx, m); err != nil {
			return MemberView{}, "", writeErr("member "+m.Name, err)
		}
	}
	cur, ok := ms.source.Member(m.Name)
	if !ok {
		// A delete of the same member won the race: nothing is wrong
		// with the request, it lost to another.
		return MemberView{}, "", toolErr(codeConflict, "member %s was deleted while this write was applied; write it again if it should exist", m.Name)
	}
	if req.wait && ms.waiter != nil {
		gen := cur.Generation
		wctx, cancel := context.WithTimeout(ctx, cmp.Or(req.timeout, DefaultSpawnTimeout))
		defer cancel()
		deleted := false
		err := ms.waiter.WaitFor(wctx, func(all []v1alpha1.Member) bool {
			for _, x := range all {
				if x.Name == m.Name {
					cur = x
					return settled(x, gen)
				}
			}
			deleted = true
			return true
		})
		if err != nil && ctx.Err() != nil {
			return MemberView{}, "", fromCore(ctx.Err())
		}
		if deleted {
			return MemberView{}, "", toolErr(codeConflict, "member %s was deleted while this write waited for it to be Ready; write it again if it should exist", m.Name)
		}
	}
	return viewOf(cur), result, nil
}

// worktreeFree refuses a member whose worktree branch another member
// claims (see decode.CheckWorktrees, which the stores and `fleetd validate`
// report): two members never share a worktree.
func (ms *members) worktreeFree(m *v1alpha1.Member) error {
	profile := func(name string) *v1alpha1.Profile {
		p, _ := ms.store.Get(v1alpha1.KindProfile, name)
		prof, _ := p.(*v1alpha1.Profile)
		return prof
	}
	var others []*v1alpha1.Member
	for _, o := range ms.store.List(v1alpha1.KindMember) {
		if om, ok := o.(*v1alpha1.Member); ok {
			others = append(others, om)
		}
	}
	rival := m.WorktreeRival(others, profile)
	if rival == nil {
		return nil
	}
	c := m.WorktreeOf(profile(m.Spec.Profile)).Claim()
	return toolErr(codeInvalidSpec, "%s: %s is claimed by member %q too; two members never share a worktree: give each a branch of its own",
		m.WorktreeField(), c, rival.Name)
}

// writeErr is a failed store write of an object ("member reviewer") as a
// tool error: what in the object is invalid, that it was written against a
// stale resourceVersion, or that the write could not be made.
func writeErr(what string, err error) error {
	var errs decode.ErrorList
	if errors.As(err, &errs) {
		return specErr(errs)
	}
	if errors.Is(err, store.ErrConflict) {
		return toolErr(codeConflict, "write %s: %v; read it again and reapply", what, err)
	}
	return toolErr(codeUnavailable, "write %s: %v", what, err)
}

// settled: the member runs the given generation, or cannot without a change.
func settled(m v1alpha1.Member, gen int64) bool {
	if m.Status.ObservedGeneration < gen && m.Status.Phase != v1alpha1.PhaseFailed {
		return false
	}
	switch m.Status.Phase {
	case v1alpha1.PhaseReady, v1alpha1.PhaseFailed, v1alpha1.PhasePaused:
		return true
	}
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady && c.Status == v1alpha1.ConditionFalse {
			switch c.Reason {
			case v1alpha1.ReasonProfileNotFound, v1alpha1.ReasonTenantNotFound, v1alpha1.ReasonInvalidSpec:
				return true
			}
		}
	}
	return false
}

// resolveWorker resolves a sessionId argument; empty means the only member.
func (ms *members) resolveWorker(ref string) (v1alpha1.Member, error) {
	if ref != "" {
		if m, ok := ms.resolve(ref); ok {
			return m, nil
		}
		return v1alpha1.Member{}, toolErr(codeNotFound, "no member with name, sessionId, terminal id or pane id %q; bridge_list shows them", ref)
	}
	all := ms.source.Members()
	switch len(all) {
	case 1:
		return all[0], nil
	case 0:
		return v1alpha1.Member{}, toolErr(codeNotFound, "there are no workers; start one with bridge_spawn")
	}
	names := make([]string, len(all))
	for i, m := range all {
		names[i] = m.Name
	}
	return v1alpha1.Member{}, toolErr(codeInvalidArgument, "sessionId is required when there are several workers (%s)", strings.Join(names, ", "))
}

// stopped is what a stop did.
type stopped struct {
	// existed is false for an unknown member.
	existed bool
	// closing: the member's tab was still open when the stop returned —
	// its agent finishes what it was given first.
	closing bool
}

// stop deletes a member's definition and, with wait, returns once its pane
// is closed or the timeout passed. A member whose agent is busy keeps its
// tab until the agent is idle (at most its grace period): the stop then
// returns with closing set once the timeout passed. With force its tab
// closes at once, whatever its agent is doing — a member deleted before
// and still closing too. A member another node runs is waited for on that
// node's report (remoteStops), and cannot be forced from here: a report
// that does not come in time is closing for an agent that was busy, and
// an error otherwise (the node does not reach etcd); a local member's
// pane is waited for as the controllers report it closed.
func (ms *members) stop(ctx context.Context, ref string, wait, force bool, timeout time.Duration) (stopped, error) {
	if ms.store == nil {
		return stopped{}, toolErr(codeUnavailable, "this gateway has no desired-state store")
	}
	m, ok := ms.resolve(ref)
	if !ok {
		return stopped{}, nil
	}
	node := m.Status.NodeName
	remote := node != "" && node != ms.node
	switch {
	case force && remote:
		return stopped{existed: true}, toolErr(codeInvalidArgument, "member %s runs on node %s: a stop is forced on the node that runs the member; "+
			"ask node %s's gateway (fleetd get nodes shows it), or stop it without force: its tab closes once its agent is idle", m.Name, node, node)
	case force && ms.expediter == nil:
		return stopped{existed: true}, toolErr(codeUnavailable, "this gateway cannot force a stop; stop %s without force", m.Name)
	}
	if err := ms.store.Delete(ctx, v1alpha1.KindMember, m.Name); err != nil {
		// A member deleted before whose tab is still closing may be
		// forced now.
		if !errors.Is(err, store.ErrNotFound) {
			return stopped{existed: true}, toolErr(codeUnavailable, "delete member %s: %v", m.Name, err)
		}
		if !force || m.Status.Phase != v1alpha1.PhaseTerminating || !ms.expediter.Expedite(m.Name) {
			return stopped{}, nil
		}
	}
	timeout = cmp.Or(timeout, DefaultStopTimeout)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if force {
		if err := ms.expedite(wctx, m); err != nil && ctx.Err() != nil {
			return stopped{existed: true}, fromCore(ctx.Err())
		}
	}
	if !wait {
		return stopped{existed: true}, nil
	}
	if remote {
		rs, ok := ms.waiter.(remoteStops)
		if !ok {
			return stopped{existed: true}, nil // nothing here hears of another node's panes
		}
		if err := rs.WaitStopped(wctx, m); err != nil {
			if ctx.Err() != nil {
				return stopped{existed: true}, fromCore(ctx.Err())
			}
			// Its node is not lost (that counts as stopped). An agent
			// that was busy when it was deleted finishes first: its tab
			// closes once it is idle. Otherwise the node should have
			// closed it by now: it does not reach etcd.
			if busyAgent(m) {
				return stopped{existed: true, closing: true}, nil
			}
			return stopped{existed: true}, toolErr(codeUnavailable, "member %s is deleted, but node %s, which runs it, has not reported its pane closed within %s; "+
				"it closes the pane when it sees the deletion, once the agent finished what it was given (is it running and reaching etcd?)", m.Name, node, timeout)
		}
		return stopped{existed: true}, nil
	}
	if m.Status.PaneID == "" {
		return stopped{existed: true}, nil
	}
	if err := ms.gone.wait(wctx, m.Status.PaneID); err != nil {
		if ctx.Err() != nil {
			return stopped{existed: true}, fromCore(ctx.Err())
		}
		return stopped{existed: true, closing: true}, nil
	}
	return stopped{existed: true}, nil
}

// busyAgent reports whether m's agent was in the middle of a turn when m
// was last seen: its node keeps its tab open until it is idle.
func busyAgent(m v1alpha1.Member) bool {
	return m.Status.AgentStatus == "working" || m.Status.AgentStatus == "blocked"
}

// expedite forces the close of deleted member m's tab once the
// controllers are on it: they show it Terminating (its agent busy) or it
// is gone. It returns when it forced the close or there was nothing to
// force, or with ctx's error.
func (ms *members) expedite(ctx context.Context, m v1alpha1.Member) error {
	if ms.waiter == nil {
		ms.expediter.Expedite(m.Name)
		return nil
	}
	return ms.waiter.WaitFor(ctx, func(all []v1alpha1.Member) bool {
		for _, o := range all {
			if o.Name == m.Name && o.UID == m.UID {
				return o.Status.Phase == v1alpha1.PhaseTerminating && ms.expediter.Expedite(m.Name)
			}
		}
		return true // gone: closed already
	})
}

// paneGone remembers the panes the controllers reported closed, so that a
// stop can wait for its pane whether the report comes before or after it
// starts waiting. Pane ids are herdr's, unique on this node only: a pane of
// another node is never waited for here.
type paneGone struct {
	mu      sync.Mutex
	gone    map[string]bool
	order   []string
	changed notify.Signal
}

const paneGoneMemory = 1024

func newPaneGone() *paneGone {
	return &paneGone{gone: map[string]bool{}}
}

func (p *paneGone) report(paneID string) {
	p.mu.Lock()
	if !p.gone[paneID] {
		p.gone[paneID] = true
		p.order = append(p.order, paneID)
		if len(p.order) > paneGoneMemory {
			delete(p.gone, p.order[0])
			p.order = p.order[1:]
		}
	}
	p.mu.Unlock()
	p.changed.Notify()
}

func (p *paneGone) wait(ctx context.Context, paneID string) error {
	return notify.Wait(ctx, &p.changed, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.gone[paneID]
	})
}
