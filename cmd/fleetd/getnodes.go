package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Nodes in `fleetd get nodes` and `fleetd describe node`: the machines of
// a fleet on etcd, as GET /nodes serves them.

var nodeResource = resource{kind: v1alpha1.KindNode, plural: "nodes", aliases: []string{"node", "no"}}

// nodeStatus is the STATUS column: Ready, NotReady or Unknown.
func nodeStatus(n *v1alpha1.Node) string {
	switch n.ReadyCondition().Status {
	case v1alpha1.ConditionTrue:
		return "Ready"
	case v1alpha1.ConditionFalse:
		return "NotReady"
	}
	return "Unknown"
}

// nodeMembers is the MEMBERS column: how many members the node runs, and
// its capacity when it has one (3/10).
func nodeMembers(n *v1alpha1.Node) string {
	if n.Spec.MaxMembers > 0 {
		return fmt.Sprintf("%d/%d", n.Status.Members, n.Spec.MaxMembers)
	}
	return fmt.Sprint(n.Status.Members)
}

// nodeHerdr is the HERDR column: herdr's version, or why there is none.
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

func printNodes(tw *tabwriter.Writer, objs []object, wide bool, now time.Time) {
	header := "NAME\tSTATUS\tLABELS\tMEMBERS\tHERDR\tAGE"
	if wide {
		header += "\tGATEWAY\tVERSION"
	}
	fmt.Fprintln(tw, header)
	for _, o := range objs {
		n := o.(*v1alpha1.Node)
		row := []string{n.Name, nodeStatus(n), mapString(n.Labels), nodeMembers(n), nodeHerdr(n), age(n.CreationTimestamp, now)}
		if wide {
			row = append(row, dash(n.Spec.GatewayURL), dash(n.Status.FleetdVersion))
		}
		fmt.Fprintln(tw, cells(row))
	}
}

// describeNode prints a node: labels, capacity, gateway, herdr and its
// Ready condition.
func describeNode(w io.Writer, n *v1alpha1.Node, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	line := fieldLine(tw)
	line(0, "Name", n.Name)
	line(0, "Labels", mapString(n.Labels))
	if n.CreationTimestamp != nil {
		line(0, "Registered", n.CreationTimestamp.UTC().Format(time.RFC3339)+" ("+age(n.CreationTimestamp, now)+" ago)")
	}
	fmt.Fprintln(tw, "Spec:")
	capacity := "no limit"
	if n.Spec.MaxMembers > 0 {
		capacity = fmt.Sprint(n.Spec.MaxMembers)
	}
	line(1, "Max Members", capacity)
	line(1, "Gateway URL", dash(n.Spec.GatewayURL))
	fmt.Fprintln(tw, "Status:")
	line(1, "Status", nodeStatus(n))
	line(1, "Members", fmt.Sprint(n.Status.Members))
	line(1, "Fleetd Version", dash(n.Status.FleetdVersion))
	h := n.Status.Herdr
	line(1, "Herdr Version", dash(h.Version))
	protocol := "-"
	if h.Protocol != 0 {
		protocol = fmt.Sprint(h.Protocol)
	}
	line(1, "Herdr Protocol", protocol)
	line(1, "Herdr Reachable", fmt.Sprint(h.Reachable))
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "Conditions:")
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, c := range n.Status.Conditions {
		since := c.LastTransitionTime
		fmt.Fprintln(tw, "  "+cells([]string{c.Type, c.Status, dash(c.Reason), age(&since, now), dash(c.Message)}))
	}
	return tw.Flush()
}
