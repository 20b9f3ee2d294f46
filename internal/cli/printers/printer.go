package printers

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// Object is what get prints of any kind: a *v1alpha1.Member, Profile,
// Tenant or Node, with its name and labels.
type Object interface {
	GetName() string
	GetMeta() *v1alpha1.ObjectMeta
}

// Printer prints objects of one kind in one format, as `fleetd get` does.
type Printer struct {
	Kind   string // v1alpha1.KindMember, KindProfile, KindTenant or KindNode
	Plural string // the kind as "No members found." names it
	Format Format
	Now    time.Time // ages are counted to it
}

// Name is how -o name prints an object: member/reviewer.
func Name(kind, name string) string {
	return strings.ToLower(kind) + "/" + termtext.Line(name)
}

// PrintList prints objs (a list: a List in JSON, YAML and templates).
func (p Printer) PrintList(w io.Writer, objs []Object) error { return p.print(w, objs, false) }

// PrintOne prints one object got by name (itself, not a List, in JSON,
// YAML and templates).
func (p Printer) PrintOne(w io.Writer, o Object) error { return p.print(w, []Object{o}, true) }

func (p Printer) print(w io.Writer, objs []Object, single bool) error {
	f := p.Format
	switch {
	case f.name == "name":
		for _, o := range objs {
			if _, err := fmt.Fprintln(w, Name(p.Kind, o.GetName())); err != nil {
				return err
			}
		}
		return nil
	case f.templated():
		if single {
			return f.executeTemplate(w, objs[0])
		}
		return f.executeTemplate(w, kubectlList(objs))
	case f.structured():
		return f.writeStructured(w, p.structured(objs, single))
	}
	if len(objs) == 0 {
		_, err := fmt.Fprintf(w, "No %s found.\n", p.Plural)
		return err
	}
	t := tables[p.Kind]
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, cells(t.header(f.wide())))
	for _, o := range objs {
		fmt.Fprintln(tw, cells(t.row(o, f.wide(), p.Now)))
	}
	return tw.Flush()
}

// structured is what JSON and YAML print: the object got by name, or the
// list. Members print as kubectl's List, which apply -f takes back; the
// other kinds as KINDList, shaped as GET /profiles and /tenants send them.
func (p Printer) structured(objs []Object, single bool) any {
	if p.Kind != v1alpha1.KindMember {
		if single {
			return objs[0]
		}
		if objs == nil {
			objs = []Object{}
		}
		return list[Object]{APIVersion: v1alpha1.GroupVersion, Kind: p.Kind + "List", Items: objs}
	}
	members := make([]v1alpha1.Member, len(objs))
	for i, o := range objs {
		members[i] = *o.(*v1alpha1.Member)
		members[i].APIVersion, members[i].Kind = v1alpha1.GroupVersion, v1alpha1.KindMember
	}
	if single {
		return members[0]
	}
	return kubectlList(members)
}

// table is the columns get prints for one kind.
type table struct {
	columns []string // the header
	wide    []string // the columns -o wide adds
	// cells are o's cells under columns and under wide.
	cells func(o Object, now time.Time) (cells, wide []string)
}

var tables = map[string]table{
	v1alpha1.KindMember: memberTable,
	v1alpha1.KindProfile: {
		// UP-TO-DATE is kubectl's for a Deployment: the members that run
		// the profile as it is, of those that use it (its rollout).
		columns: []string{"NAME", "HARNESS", "UP-TO-DATE", "RESTART", "RESUME", "AGE"},
		wide:    []string{"REVISION", "CWD", "DESCRIPTION"},
		cells: func(o Object, now time.Time) ([]string, []string) {
			p := o.(*v1alpha1.Profile)
			revision := "-"
			if p.Status.Revision > 0 {
				revision = fmt.Sprint(p.Status.Revision)
			}
			return []string{p.Name, p.Spec.Harness, fmt.Sprintf("%d/%d", p.Status.UpdatedMembers, p.Status.Members), dash(p.Spec.RestartPolicy),
					dash(p.Spec.Resume), age(p.CreationTimestamp, now)},
				[]string{revision, dash(p.Spec.Cwd), dash(p.Spec.Description)}
		},
	},
	v1alpha1.KindTenant: {
		columns: []string{"NAME", "URL", "CREDENTIAL ENV", "AGE"},
		cells: func(o Object, now time.Time) ([]string, []string) {
			t := o.(*v1alpha1.Tenant)
			return []string{t.Name, t.Spec.URL, t.Spec.CredentialEnv, age(t.CreationTimestamp, now)}, nil
		},
	},
	v1alpha1.KindNode: {
		columns: []string{"NAME", "STATUS", "LABELS", "MEMBERS", "HERDR", "AGE"},
		wide:    []string{"GATEWAY", "VERSION"},
		cells: func(o Object, now time.Time) ([]string, []string) {
			n := o.(*v1alpha1.Node)
			return []string{n.Name, nodeStatus(n), mapString(n.Labels), nodeMembers(n), nodeHerdr(n), age(n.CreationTimestamp, now)},
				[]string{dash(n.Spec.GatewayURL), dash(n.Status.FleetdVersion)}
		},
	},
}

// memberTable is the member table of get and of get -w.
var memberTable = table{
	columns: []string{"NAME", "PHASE", "AGENT", "PANE", "RESTARTS", "AGE"},
	wide:    []string{"NODE", "PROFILE", "TARGET", "TRANSPORT", "WORKSPACE", "BRANCH", "TERMINAL", "SESSION"},
	cells: func(o Object, now time.Time) ([]string, []string) {
		m := o.(*v1alpha1.Member)
		return []string{m.Name, phase(m), dash(m.Status.AgentStatus), dash(m.Status.PaneID), strconv.Itoa(int(m.Status.Restarts)), age(m.CreationTimestamp, now)},
			[]string{dash(m.Status.NodeName), m.Spec.Profile, targetString(m.Spec.MCPTarget), dash(m.Spec.Transport),
				dash(m.Spec.Workspace), dash(branch(m)), dash(m.Status.TerminalID), dash(m.Status.SessionID)}
	},
}

func (t table) header(wide bool) []string {
	if wide {
		return append(append([]string(nil), t.columns...), t.wide...)
	}
	return append([]string(nil), t.columns...)
}

func (t table) row(o Object, wide bool, now time.Time) []string {
	row, more := t.cells(o, now)
	if wide {
		row = append(row, more...)
	}
	return row
}

// phase is the PHASE column of a member and describe's Phase line: the
// member's [v1alpha1.Member.DisplayPhase], or "-".
func phase(m *v1alpha1.Member) string { return dash(m.DisplayPhase()) }

// nodeStatus is a node's STATUS: Ready, NotReady or Unknown.
func nodeStatus(n *v1alpha1.Node) string {
	switch n.ReadyCondition().Status {
	case v1alpha1.ConditionTrue:
		return "Ready"
	case v1alpha1.ConditionFalse:
		return "NotReady"
	}
	return "Unknown"
}

// nodeMembers is a node's MEMBERS: how many members it runs, and its
// capacity when it has one (3/10).
func nodeMembers(n *v1alpha1.Node) string {
	if n.Spec.MaxMembers > 0 {
		return fmt.Sprintf("%d/%d", n.Status.Members, n.Spec.MaxMembers)
	}
	return fmt.Sprint(n.Status.Members)
}

// nodeHerdr is a node's HERDR: herdr's version, or why there is none.
func nodeHerdr(n *v1alpha1.Node) string {
	h := n.Status.Herdr
	switch {
	case h.Version == "" && !h.Reachable:
		return "unreachable"
	case h.Version == "":
		return "-"
	case !h.Reachable:
		return h.Version + " (unreachable)"
	}
	return h.Version
}
