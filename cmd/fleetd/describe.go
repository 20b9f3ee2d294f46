package main

import (
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

func newDescribeCmd() *cobra.Command {
	var flags clientFlags
	cmd := &cobra.Command{
		Use:   "describe member|profile|tenant|node NAME",
		Short: "Show a member's spec, status, conditions and recent events, or a profile or tenant",
		Long: `describe shows one object of the running fleetd in full. A member's NAME may
also be its pane id, terminal id or session id.`,
		Example: `  fleetd describe member reviewer
  fleetd describe member w1:p2
  fleetd describe profile claude`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeResourceNames(&flags),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, ok := lookupResource(args[0])
			if !ok {
				return usageErrorf(cmd, "unknown resource type %q; fleetd serves: member, profile, tenant or node", args[0])
			}
			c, err := flags.client()
			if err != nil {
				return err
			}
			ctx, now := cmd.Context(), time.Now()
			if r.kind != v1alpha1.KindMember {
				objs, err := r.fetch(ctx, c, args[1])
				if err != nil {
					return err
				}
				switch o := objs[0].(type) {
				case *v1alpha1.Profile:
					return describeProfile(cmd.OutOrStdout(), o, now)
				case *v1alpha1.Tenant:
					return describeTenant(cmd.OutOrStdout(), o, now)
				case *v1alpha1.Node:
					return describeNode(cmd.OutOrStdout(), o, now)
				}
			}
			m, err := resolveMember(ctx, c, args[1])
			if err != nil {
				return err
			}
			var events []v1alpha1.Event
			if err := c.get(ctx, "/members/"+url.PathEscape(m.Name)+"/events", &events); err != nil {
				return err
			}
			return describeMember(cmd.OutOrStdout(), &m, events, now)
		},
	}
	flags.register(cmd)
	return cmd
}

// describeMember prints m and its events. Every value is printed safe for
// a terminal on one line (package termtext): labels, the prompt, errors,
// condition and event messages and the agents' own reports may hold
// anything.
func describeMember(w io.Writer, m *v1alpha1.Member, events []v1alpha1.Event, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	p := fieldLine(tw)
	p(0, "Name", m.Name)
	p(0, "Labels", mapString(m.Labels))
	p(0, "Annotations", mapString(m.Annotations))
	p(0, "UID", dash(m.UID))
	p(0, "Generation", fmt.Sprint(m.Generation))
	if m.CreationTimestamp != nil {
		p(0, "Created", m.CreationTimestamp.UTC().Format(time.RFC3339)+" ("+age(m.CreationTimestamp, now)+" ago)")
	}
	fmt.Fprintln(tw, "Spec:")
	p(1, "Profile", m.Spec.Profile)
	p(1, "MCP Target", targetString(m.Spec.MCPTarget))
	p(1, "Transport", dash(m.Spec.Transport))
	p(1, "Workspace", dash(m.Spec.Workspace))
	p(1, "Cwd", dash(m.Spec.Cwd))
	p(1, "Prompt", dash(m.Spec.Prompt))
	p(1, "Paused", fmt.Sprint(m.Spec.Paused))
	if m.Spec.NodeName != "" || len(m.Spec.NodeSelector) > 0 {
		p(1, "Node Name", dash(m.Spec.NodeName))
		p(1, "Node Selector", mapString(m.Spec.NodeSelector))
	}
	st := m.Status
	fmt.Fprintln(tw, "Status:")
	p(1, "Phase", phaseCell(*m))
	p(1, "Node", dash(st.NodeName))
	p(1, "Agent Status", dash(st.AgentStatus))
	p(1, "Observed Generation", fmt.Sprint(st.ObservedGeneration))
	p(1, "Session ID", dash(st.SessionID))
	p(1, "Workspace ID", dash(st.WorkspaceID))
	p(1, "Tab ID", dash(st.TabID))
	p(1, "Pane ID", dash(st.PaneID))
	p(1, "Terminal ID", dash(st.TerminalID))
	p(1, "Restarts", fmt.Sprint(st.Restarts))
	p(1, "Resumed Session", resumedSession(st.ResumedSession))
	p(1, "Last Error", dash(st.LastError))
	if err := tw.Flush(); err != nil {
		return err
	}

	tw = tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "MCP Plan:")
	if len(st.Plan) == 0 {
		fmt.Fprintln(tw, "  <none>")
	} else {
		fmt.Fprintln(tw, "  SERVER\tTARGET\tTRANSPORT\tURL\tCREDENTIAL ENV")
		for _, r := range st.Plan {
			fmt.Fprintln(tw, "  "+cells([]string{r.Server, r.Target, r.Transport, dash(r.URL), dash(r.CredentialEnv)}))
		}
	}
	fmt.Fprintln(tw, "Conditions:")
	if len(st.Conditions) == 0 {
		fmt.Fprintln(tw, "  <none>")
	} else {
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, c := range st.Conditions {
			t := c.LastTransitionTime
			fmt.Fprintln(tw, "  "+cells([]string{c.Type, c.Status, dash(c.Reason), age(&t, now), c.Message}))
		}
	}
	fmt.Fprintln(tw, "Events:")
	if len(events) == 0 {
		fmt.Fprintln(tw, "  <none>")
	} else {
		fmt.Fprintln(tw, "  TYPE\tREASON\tAGE\tMESSAGE")
		for _, e := range events {
			t := e.Time
			a := age(&t, now)
			if e.Count > 1 {
				a = fmt.Sprintf("%s (x%d)", a, e.Count)
			}
			fmt.Fprintln(tw, "  "+cells([]string{e.Type, e.Reason, a, e.Message}))
		}
	}
	return tw.Flush()
}

func mapString(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// resumedSession names the agent's own session the pane was launched to
// resume ("codex id 0199…"), or "<none>" for a fresh start.
func resumedSession(s *v1alpha1.AgentSession) string {
	if s == nil {
		return "<none>"
	}
	return s.Agent + " " + s.Kind + " " + s.Value
}
