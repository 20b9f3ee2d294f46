package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

func newGetCmd() *cobra.Command {
	var flags clientFlags
	var output string
	cmd := &cobra.Command{
		Use:   "get members [NAME]",
		Short: "List members and their status from a running fleetd",
		Example: `  fleetd get members
  fleetd get members -o wide
  fleetd get members reviewer -o yaml`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !isMembersResource(args[0]) {
				return usageErrorf(cmd, "unknown resource type %q; fleetd serves: members", args[0])
			}
			switch output {
			case "", "wide", "yaml", "json":
			default:
				return usageErrorf(cmd, "unknown output format %q; want wide, yaml or json", output)
			}
			c, err := flags.client()
			if err != nil {
				return err
			}
			var members []v1alpha1.Member
			var single bool
			if len(args) == 2 {
				var m v1alpha1.Member
				if err := c.get(cmd.Context(), "/members/"+args[1], &m); err != nil {
					return err
				}
				members, single = []v1alpha1.Member{m}, true
			} else {
				var list mcp.MemberList
				if err := c.get(cmd.Context(), "/members", &list); err != nil {
					return err
				}
				members = list.Items
			}
			return printMembers(cmd.OutOrStdout(), members, output, single, time.Now())
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, yaml or json")
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
		var v any = mcp.MemberList{APIVersion: v1alpha1.GroupVersion, Kind: "MemberList", Items: members}
		if single {
			v = members[0]
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		// The same data, with what a terminal would obey escaped; the
		// YAML writer escapes what is left but the bidi controls.
		b = termtext.JSON(b)
		if output == "yaml" {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
		} else {
			b = append(b, '\n')
		}
		_, err = w.Write(b)
		return err
	}
	if len(members) == 0 {
		_, err := fmt.Fprintln(w, "No members found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := []string{"NAME", "PHASE", "AGENT", "PANE", "RESTARTS", "AGE"}
	if output == "wide" {
		header = append(header, "PROFILE", "TARGET", "TRANSPORT", "WORKSPACE", "TERMINAL", "SESSION")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, m := range members {
		row := []string{m.Name, phaseCell(m), dash(m.Status.AgentStatus), dash(m.Status.PaneID),
			strconv.Itoa(int(m.Status.Restarts)), age(m.CreationTimestamp, now)}
		if output == "wide" {
			row = append(row, m.Spec.Profile, targetString(m.Spec.MCPTarget), dash(m.Spec.Transport),
				dash(m.Spec.Workspace), dash(m.Status.TerminalID), dash(m.Status.SessionID))
		}
		fmt.Fprintln(tw, cells(row))
	}
	return tw.Flush()
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
