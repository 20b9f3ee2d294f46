package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

func newGetCmd() *cobra.Command {
	var flags clientFlags
	var opts getOptions
	cmd := &cobra.Command{
		Use:   "get members|profiles|tenants|nodes [NAME]",
		Short: "List members, profiles or tenants from a running fleetd; watch members change",
		Long: `get lists the members (with their status), profiles or tenants of the running
fleetd, or shows one by NAME. A member's NAME may also be its pane id,
terminal id or session id. -w (members only) keeps going: after the list it
prints one line per change, streamed by fleetd as it happens.`,
		Example: `  fleetd get members
  fleetd get members -o wide
  fleetd get members reviewer -o yaml
  fleetd get members -l 'team=support,tier in (a,b)' --sort-by .status.restarts
  fleetd get members -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}'
  fleetd get members -w
  fleetd get profiles -o name`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeResourceNames(&flags),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd, &flags, opts, args)
		},
	}
	flags.register(cmd)
	opts.register(cmd)
	return cmd
}

func isMembersResource(s string) bool {
	switch s {
	case "members", "member", "mem", "m":
		return true
	}
	return false
}

func printMembers(w io.Writer, members []v1alpha1.Member, output string, single bool, now time.Time) error {
	for i := range members {
		members[i].APIVersion, members[i].Kind = v1alpha1.GroupVersion, v1alpha1.KindMember
	}
	switch output {
	case "json", "yaml":
		// Several objects print as kubectl's List, which apply -f takes back.
		var v any = mcp.MemberList{APIVersion: "v1", Kind: "List", Items: members}
		if single {
			v = members[0]
		}
		return writeStructured(w, v, output)
	}
	if len(members) == 0 {
		_, err := fmt.Fprintln(w, "No members found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(memberHeader(output == "wide"), "\t"))
	for _, m := range members {
		fmt.Fprintln(tw, cells(memberRow(&m, output == "wide", now)))
	}
	return tw.Flush()
}

// memberHeader and memberRow are the columns of the member table.
func memberHeader(wide bool) []string {
	header := []string{"NAME", "PHASE", "AGENT", "PANE", "RESTARTS", "AGE"}
	if wide {
		header = append(header, "NODE", "PROFILE", "TARGET", "TRANSPORT", "WORKSPACE", "TERMINAL", "SESSION")
	}
	return header
}

func memberRow(m *v1alpha1.Member, wide bool, now time.Time) []string {
	row := []string{m.Name, phaseCell(*m), dash(m.Status.AgentStatus), dash(m.Status.PaneID),
		strconv.Itoa(int(m.Status.Restarts)), age(m.CreationTimestamp, now)}
	if wide {
		row = append(row, dash(m.Status.NodeName), m.Spec.Profile, targetString(m.Spec.MCPTarget), dash(m.Spec.Transport),
			dash(m.Spec.Workspace), dash(m.Status.TerminalID), dash(m.Status.SessionID))
	}
	return row
}

// cells joins a table row for a tabwriter, each cell made safe for a
// terminal on one line (package termtext): names, statuses and ids come from
// manifests, herdr and the agents' own reports, and a tab or newline in one
// would also break the table.
func cells(row []string) string {
	for i, c := range row {
		row[i] = termtext.Line(c)
	}
	return strings.Join(row, "\t")
}

func targetString(t *v1alpha1.MCPTarget) string {
	switch {
	case t == nil:
		return v1alpha1.TargetResident
	case t.Kind == v1alpha1.TargetTenant:
		return t.Kind + "/" + t.TenantID
	default:
		return dash(t.Kind)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age renders how long ago t was the way kubectl does: 45s, 12m, 5h, 3d.
func age(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return humanDuration(now.Sub(*t))
}

func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
