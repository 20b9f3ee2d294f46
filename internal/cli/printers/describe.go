package printers

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// `fleetd describe` prints an object as lines of "Label:  value", aligned
// within each section (metadata, Spec:, Status:), then its tables. The
// lines come from lists of fields, one per line: showing a new field of a
// spec or status is adding its line to the list (TestDescribe_ShowsEveryField
// fails until it is there, or is named as left out).

// A field is one line of describe: a label and how to show the value of a T
// (an empty value prints as the field's own placeholder, "-" or "<none>").
type field[T any] struct {
	label string
	value func(*T) string
	// shown, when set, prints the line only when it says so.
	shown func(*T) bool
}

// printFields prints v's fields at indent (levels of two spaces), each
// value safe for a terminal on one line (package termtext).
func printFields[T any](w io.Writer, indent int, v *T, fields []field[T]) {
	for _, f := range fields {
		if f.shown == nil || f.shown(v) {
			fmt.Fprintf(w, "%s%s:\t%s\n", strings.Repeat("  ", indent), f.label, termtext.Line(f.value(v)))
		}
	}
}

// subtable prints one of describe's tables, two spaces in: its title, then
// its header and rows — or, with no rows, none instead (when none is "",
// the header alone).
func subtable(w io.Writer, title string, header []string, rows [][]string, none string) {
	fmt.Fprintln(w, title)
	if len(rows) == 0 && none != "" {
		fmt.Fprintln(w, "  "+none)
		return
	}
	fmt.Fprintln(w, "  "+strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, "  "+cells(r))
	}
}

// Metadata lines.
var (
	nameLine        = field[v1alpha1.ObjectMeta]{label: "Name", value: func(m *v1alpha1.ObjectMeta) string { return m.Name }}
	labelsLine      = field[v1alpha1.ObjectMeta]{label: "Labels", value: func(m *v1alpha1.ObjectMeta) string { return mapString(m.Labels) }}
	annotationsLine = field[v1alpha1.ObjectMeta]{label: "Annotations", value: func(m *v1alpha1.ObjectMeta) string { return mapString(m.Annotations) }}
)

// createdLine is when an object was created, and how long ago; label
// names it ("Created", a node's "Registered").
func createdLine(label string, now time.Time) field[v1alpha1.ObjectMeta] {
	return field[v1alpha1.ObjectMeta]{label: label,
		shown: func(m *v1alpha1.ObjectMeta) bool { return m.CreationTimestamp != nil },
		value: func(m *v1alpha1.ObjectMeta) string {
			return m.CreationTimestamp.UTC().Format(time.RFC3339) + " (" + age(m.CreationTimestamp, now) + " ago)"
		}}
}

// objectMeta is the metadata describe prints of a Profile or Tenant.
func objectMeta(now time.Time) []field[v1alpha1.ObjectMeta] {
	return []field[v1alpha1.ObjectMeta]{nameLine, labelsLine, annotationsLine, createdLine("Created", now)}
}

// newTabwriter is describe's: two spaces between label and value, three
// between the columns of its tables.
func newTabwriter(w io.Writer, padding int) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, padding, ' ', 0)
}

// memberSpecFields are a Member's spec lines, one per field of
// v1alpha1.MemberSpec.
var memberSpecFields = []field[v1alpha1.MemberSpec]{
	{label: "Profile", value: func(s *v1alpha1.MemberSpec) string { return s.Profile }},
	{label: "MCP Target", value: func(s *v1alpha1.MemberSpec) string { return targetString(s.MCPTarget) }},
	{label: "Transport", value: func(s *v1alpha1.MemberSpec) string { return dash(s.Transport) }},
	{label: "Workspace", value: func(s *v1alpha1.MemberSpec) string { return dash(s.Workspace) }},
	{label: "Cwd", value: func(s *v1alpha1.MemberSpec) string { return dash(s.Cwd) }},
	{label: "Prompt", value: func(s *v1alpha1.MemberSpec) string { return dash(s.Prompt) }},
	{label: "Paused", value: func(s *v1alpha1.MemberSpec) string { return fmt.Sprint(s.Paused) }},
	// Placement means something only in a fleet on etcd: shown when set.
	{label: "Node Name", value: func(s *v1alpha1.MemberSpec) string { return dash(s.NodeName) }, shown: placed},
	{label: "Node Selector", value: func(s *v1alpha1.MemberSpec) string { return mapString(s.NodeSelector) }, shown: placed},
	{label: "Worktree", value: func(s *v1alpha1.MemberSpec) string { return memberWorktree(s.Worktree) },
		shown: func(s *v1alpha1.MemberSpec) bool { return s.Worktree != nil }},
	// How a busy agent is waited for: shown when the member says it
	// (otherwise its profile's grace period applies, and an update waits
	// for idle however long).
	{label: "Termination Grace Period", value: func(s *v1alpha1.MemberSpec) string { return durationPtr(s.TerminationGracePeriod) },
		shown: func(s *v1alpha1.MemberSpec) bool { return s.TerminationGracePeriod != nil }},
	{label: "Update Max Wait", value: func(s *v1alpha1.MemberSpec) string { return durationPtr(s.UpdateStrategy.MaxWait) },
		shown: func(s *v1alpha1.MemberSpec) bool { return s.UpdateStrategy != nil && s.UpdateStrategy.MaxWait != nil }},
}

// memberWorktree is a spec.worktree's line, shown when it is set:
// "branch agents/x of /srv/api, from main, cleanup Never" (a profile may
// give a member without one a worktree: the status shows it).
func memberWorktree(w *v1alpha1.MemberWorktree) string {
	return fmt.Sprintf("branch %s of %s, from %s, cleanup %s", w.Branch, w.Repo, baseText(w.Base), dash(w.Cleanup))
}

// baseText names a worktree's base: the ref, or the repository's HEAD.
func baseText(base string) string {
	if base == "" {
		return "the repository's HEAD"
	}
	return base
}

// worktreeShown: a member's status shows worktree lines once fleetd read
// its worktree.
func worktreeShown(m *v1alpha1.Member) bool { return m.Status.Worktree != nil }

// shortHead is a commit hash as git abbreviates it by default.
func shortHead(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return dash(h)
}

// durationPtr is an optional duration, "-" when unset.
func durationPtr(d *v1alpha1.Duration) string {
	if d == nil {
		return "-"
	}
	return durationText(*d)
}

func placed(s *v1alpha1.MemberSpec) bool { return s.NodeName != "" || len(s.NodeSelector) > 0 }

// memberStatusFields are a Member's status lines; its plan and conditions
// are tables of their own.
var memberStatusFields = []field[v1alpha1.Member]{
	{label: "Phase", value: phase},
	{label: "Node", value: func(m *v1alpha1.Member) string { return dash(m.Status.NodeName) }},
	{label: "Agent Status", value: func(m *v1alpha1.Member) string { return dash(m.Status.AgentStatus) }},
	{label: "Observed Generation", value: func(m *v1alpha1.Member) string { return fmt.Sprint(m.Status.ObservedGeneration) }},
	{label: "Session ID", value: func(m *v1alpha1.Member) string { return dash(m.Status.SessionID) }},
	{label: "Workspace ID", value: func(m *v1alpha1.Member) string { return dash(m.Status.WorkspaceID) }},
	{label: "Tab ID", value: func(m *v1alpha1.Member) string { return dash(m.Status.TabID) }},
	{label: "Pane ID", value: func(m *v1alpha1.Member) string { return dash(m.Status.PaneID) }},
	{label: "Terminal ID", value: func(m *v1alpha1.Member) string { return dash(m.Status.TerminalID) }},
	{label: "Restarts", value: func(m *v1alpha1.Member) string { return fmt.Sprint(m.Status.Restarts) }},
	{label: "Resumed Session", value: func(m *v1alpha1.Member) string { return resumedSession(m.Status.ResumedSession) }},
	// The worktree: where, the branch against its base, what is not
	// committed, and the last commit.
	{label: "Worktree", shown: worktreeShown, value: func(m *v1alpha1.Member) string { return dash(m.Status.Worktree.Path) }},
	{label: "Branch", shown: worktreeShown, value: func(m *v1alpha1.Member) string {
		w := m.Status.Worktree
		return fmt.Sprintf("%s (ahead %d, behind %d)", dash(w.Branch), w.Ahead, w.Behind)
	}},
	{label: "Uncommitted", shown: worktreeShown, value: func(m *v1alpha1.Member) string {
		return fmt.Sprintf("%d %s", m.Status.Worktree.Dirty, map[bool]string{true: "file", false: "files"}[m.Status.Worktree.Dirty == 1])
	}},
	{label: "Last Commit", shown: worktreeShown, value: func(m *v1alpha1.Member) string {
		w := m.Status.Worktree
		return shortHead(w.Head) + " " + w.LastCommit
	}},
	{label: "Last Error", value: func(m *v1alpha1.Member) string { return dash(m.Status.LastError) }},
	{label: "Rollout", shown: func(m *v1alpha1.Member) bool { return m.Status.Rollout != "" },
		value: func(m *v1alpha1.Member) string { return "being replaced by profile/" + m.Status.Rollout + "'s rollout" }},
}

// DescribeMember prints m and its events. Every value is printed safe for
// a terminal on one line (package termtext): labels, the prompt, errors,
// condition and event messages and the agents' own reports may hold
// anything.
func DescribeMember(w io.Writer, m *v1alpha1.Member, events []v1alpha1.Event, now time.Time) error {
	tw := newTabwriter(w, 2)
	printFields(tw, 0, &m.ObjectMeta, []field[v1alpha1.ObjectMeta]{nameLine, labelsLine, annotationsLine,
		{label: "UID", value: func(m *v1alpha1.ObjectMeta) string { return dash(m.UID) }},
		{label: "Generation", value: func(m *v1alpha1.ObjectMeta) string { return fmt.Sprint(m.Generation) }},
		createdLine("Created", now)})
	fmt.Fprintln(tw, "Spec:")
	printFields(tw, 1, &m.Spec, memberSpecFields)
	fmt.Fprintln(tw, "Status:")
	printFields(tw, 1, m, memberStatusFields)
	if err := tw.Flush(); err != nil {
		return err
	}

	tw = newTabwriter(w, 3)
	var plan, conditions, evs [][]string
	for _, r := range m.Status.Plan {
		plan = append(plan, []string{r.Server, r.Target, r.Transport, dash(r.URL), dash(r.CredentialEnv)})
	}
	for _, c := range m.Status.Conditions {
		t := c.LastTransitionTime
		conditions = append(conditions, []string{c.Type, c.Status, dash(c.Reason), age(&t, now), c.Message})
	}
	evs = eventRows(events, now)
	subtable(tw, "MCP Plan:", []string{"SERVER", "TARGET", "TRANSPORT", "URL", "CREDENTIAL ENV"}, plan, "<none>")
	subtable(tw, "Conditions:", []string{"TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}, conditions, "<none>")
	subtable(tw, "Events:", []string{"TYPE", "REASON", "AGE", "MESSAGE"}, evs, "<none>")
	return tw.Flush()
}

// resumedSession names the agent's own session the pane was launched to
// resume ("codex id 0199…"), or "<none>" for a fresh start.
func resumedSession(s *v1alpha1.AgentSession) string {
	if s == nil {
		return "<none>"
	}
	return s.Agent + " " + s.Kind + " " + s.Value
}

// profileSpecFields are a Profile's spec lines. Its env values are the
// operator's and may be credentials: describe names the variables, -o
// yaml shows them.
var profileSpecFields = []field[v1alpha1.ProfileSpec]{
	{label: "Harness", value: func(s *v1alpha1.ProfileSpec) string { return s.Harness }},
	{label: "Description", value: func(s *v1alpha1.ProfileSpec) string { return dash(s.Description) }},
	{label: "Args", value: func(s *v1alpha1.ProfileSpec) string {
		if len(s.Args) == 0 {
			return "<none>"
		}
		return strings.Join(s.Args, " ")
	}},
	{label: "Env", value: func(s *v1alpha1.ProfileSpec) string {
		if len(s.Env) == 0 {
			return "<none>"
		}
		return strings.Join(slices.Sorted(maps.Keys(s.Env)), ",") + " (values: -o yaml)"
	}},
	{label: "Cwd", value: func(s *v1alpha1.ProfileSpec) string { return dash(s.Cwd) }},
	{label: "Startup Timeout", value: func(s *v1alpha1.ProfileSpec) string { return durationText(s.StartupTimeout) }},
	{label: "Tool Timeout", value: func(s *v1alpha1.ProfileSpec) string { return durationText(s.ToolTimeout) }},
	{label: "Restart Policy", value: func(s *v1alpha1.ProfileSpec) string { return dash(s.RestartPolicy) }},
	{label: "Resume", value: func(s *v1alpha1.ProfileSpec) string { return dash(s.Resume) }},
	{label: "Worktree", value: func(s *v1alpha1.ProfileSpec) string { return profileWorktree(s.Worktree) },
		shown: func(s *v1alpha1.ProfileSpec) bool { return s.Worktree != nil }},
	{label: "Termination Grace Period", value: func(s *v1alpha1.ProfileSpec) string { return durationText(s.TerminationGracePeriod) }},
	// How a change reaches the members (spec.rollout).
	{label: "Rollout Max Unavailable", value: func(s *v1alpha1.ProfileSpec) string {
		if s.Rollout == nil || s.Rollout.MaxUnavailable == nil {
			return fmt.Sprint(v1alpha1.DefaultMaxUnavailable)
		}
		return s.Rollout.MaxUnavailable.String()
	}},
	{label: "Rollout Paused", value: func(s *v1alpha1.ProfileSpec) string { return fmt.Sprint(s.Rollout != nil && s.Rollout.Paused) }},
}

// profileStatusFields are a Profile's status lines: its rollout to its
// members. Its conditions are a table.
var profileStatusFields = []field[v1alpha1.ProfileStatus]{
	{label: "Revision", value: func(s *v1alpha1.ProfileStatus) string {
		if s.Revision == 0 {
			return "-"
		}
		return fmt.Sprint(s.Revision)
	}},
	{label: "Observed Generation", value: func(s *v1alpha1.ProfileStatus) string { return fmt.Sprint(s.ObservedGeneration) }},
	{label: "Members", value: func(s *v1alpha1.ProfileStatus) string {
		return fmt.Sprintf("%d (%d updated, %d of them Ready)", s.Members, s.UpdatedMembers, s.ReadyMembers)
	}},
	{label: "Updating", value: func(s *v1alpha1.ProfileStatus) string {
		if len(s.Updating) == 0 {
			return "<none>"
		}
		return strings.Join(s.Updating, ", ")
	}},
}

// profileWorktree is a Profile's worktree line, shown when it is set: the
// branches it gives its members, and whether herdr trusts their
// repositories.
func profileWorktree(w *v1alpha1.ProfileWorktree) string {
	line := "none given"
	if w.Repo != "" {
		line = fmt.Sprintf("branch %s/MEMBER of %s for each member without cwd, from %s, cleanup %s", w.BranchPrefix, w.Repo, baseText(w.Base), dash(w.Cleanup))
	}
	if w.TrustRepository {
		return line + "; herdr trusts the repositories"
	}
	return line
}

// DescribeProfile prints a Profile: its spec, its rollout to its members
// (status and conditions), and, from r (nil: a fleetd without rollouts),
// the members the rollout waits for, the revisions kept and the profile's
// events.
func DescribeProfile(w io.Writer, p *v1alpha1.Profile, r *mcp.RolloutView, now time.Time) error {
	tw := newTabwriter(w, 2)
	printFields(tw, 0, &p.ObjectMeta, objectMeta(now))
	fmt.Fprintln(tw, "Spec:")
	printFields(tw, 1, &p.Spec, profileSpecFields)
	fmt.Fprintln(tw, "Status:")
	printFields(tw, 1, &p.Status, profileStatusFields)
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = newTabwriter(w, 3)
	var conditions, waits, revisions, evs [][]string
	for _, c := range p.Status.Conditions {
		t := c.LastTransitionTime
		conditions = append(conditions, []string{c.Type, c.Status, dash(c.Reason), age(&t, now), c.Message})
	}
	subtable(tw, "Conditions:", []string{"TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}, conditions, "<none>")
	if r != nil {
		for _, wt := range r.Waits {
			waits = append(waits, []string{wt.Member, wt.Reason, wt.Message})
		}
		for _, rev := range r.Revisions {
			t := rev.Time
			revisions = append(revisions, []string{fmt.Sprint(rev.Revision), age(&t, now), cmpNone(rev.ChangeCause)})
		}
		evs = eventRows(r.Events, now)
		subtable(tw, "Waiting:", []string{"MEMBER", "REASON", "MESSAGE"}, waits, "<none>")
		subtable(tw, "Revisions:", []string{"REVISION", "AGE", "CHANGE-CAUSE"}, revisions, "<none>")
		subtable(tw, "Events:", []string{"TYPE", "REASON", "AGE", "MESSAGE"}, evs, "<none>")
	}
	return tw.Flush()
}

// eventRows are events as describe's rows: type, reason, age (with the
// count of a repeated one) and message.
func eventRows(events []v1alpha1.Event, now time.Time) [][]string {
	var rows [][]string
	for _, e := range events {
		t := e.Time
		a := age(&t, now)
		if e.Count > 1 {
			a = fmt.Sprintf("%s (x%d)", a, e.Count)
		}
		rows = append(rows, []string{e.Type, e.Reason, a, e.Message})
	}
	return rows
}

func durationText(d v1alpha1.Duration) string {
	if d.Duration == 0 {
		return "-"
	}
	return d.Duration.String()
}

// tenantSpecFields are a Tenant's spec lines: its gateway and the name of
// the variable holding its credential (never the credential).
var tenantSpecFields = []field[v1alpha1.TenantSpec]{
	{label: "URL", value: func(s *v1alpha1.TenantSpec) string { return s.URL }},
	{label: "Credential Env", value: func(s *v1alpha1.TenantSpec) string { return s.CredentialEnv }},
}

// DescribeTenant prints a Tenant.
func DescribeTenant(w io.Writer, t *v1alpha1.Tenant, now time.Time) error {
	tw := newTabwriter(w, 2)
	printFields(tw, 0, &t.ObjectMeta, objectMeta(now))
	fmt.Fprintln(tw, "Spec:")
	printFields(tw, 1, &t.Spec, tenantSpecFields)
	return tw.Flush()
}

// nodeSpecFields and nodeStatusFields are a Node's lines; its conditions
// are a table.
var (
	nodeSpecFields = []field[v1alpha1.NodeSpec]{
		{label: "Max Members", value: func(s *v1alpha1.NodeSpec) string {
			if s.MaxMembers > 0 {
				return fmt.Sprint(s.MaxMembers)
			}
			return "no limit"
		}},
		{label: "Gateway URL", value: func(s *v1alpha1.NodeSpec) string { return dash(s.GatewayURL) }},
	}
	nodeStatusFields = []field[v1alpha1.Node]{
		{label: "Status", value: nodeStatus},
		{label: "Members", value: func(n *v1alpha1.Node) string { return fmt.Sprint(n.Status.Members) }},
		{label: "Fleetd Version", value: func(n *v1alpha1.Node) string { return dash(n.Status.FleetdVersion) }},
		{label: "Herdr Version", value: func(n *v1alpha1.Node) string { return dash(n.Status.Herdr.Version) }},
		{label: "Herdr Protocol", value: func(n *v1alpha1.Node) string {
			if n.Status.Herdr.Protocol == 0 {
				return "-"
			}
			return fmt.Sprint(n.Status.Herdr.Protocol)
		}},
		{label: "Herdr Reachable", value: func(n *v1alpha1.Node) string { return fmt.Sprint(n.Status.Herdr.Reachable) }},
	}
)

// DescribeNode prints a node: labels, capacity, gateway, herdr and its
// Ready condition.
func DescribeNode(w io.Writer, n *v1alpha1.Node, now time.Time) error {
	tw := newTabwriter(w, 2)
	printFields(tw, 0, &n.ObjectMeta, []field[v1alpha1.ObjectMeta]{nameLine, labelsLine, createdLine("Registered", now)})
	fmt.Fprintln(tw, "Spec:")
	printFields(tw, 1, &n.Spec, nodeSpecFields)
	fmt.Fprintln(tw, "Status:")
	printFields(tw, 1, n, nodeStatusFields)
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = newTabwriter(w, 3)
	var conditions [][]string
	for _, c := range n.Status.Conditions {
		since := c.LastTransitionTime
		conditions = append(conditions, []string{c.Type, c.Status, dash(c.Reason), age(&since, now), dash(c.Message)})
	}
	subtable(tw, "Conditions:", []string{"TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"}, conditions, "")
	return tw.Flush()
}
