package daemon

import (
	"context"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcdstore"
	"github.com/fleetd-dev/fleetd/mcp"
)

// Reasons of the Ready condition the fleet view gives a member this node
// does not run.
const (
	// ReasonUnschedulable: no node can take the member; the message says
	// why (the scheduler's own words, from the same placement rule).
	ReasonUnschedulable = "Unschedulable"
	// ReasonOnAnotherNode: the member is bound to another node, which
	// keeps its status.
	ReasonOnAnotherNode = "OnAnotherNode"
	// ReasonNodeLost: the member is bound to a node whose lease expired;
	// it is rescheduled after --reschedule-after unless spec.nodeName
	// pins it there.
	ReasonNodeLost = v1alpha1.ReasonNodeLost
)

// localMembers is what the fleet view reads of this node's own members:
// the controllers, status included.
type localMembers interface {
	Changed() <-chan struct{}
	Members() []v1alpha1.Member
	Member(name string) (v1alpha1.Member, bool)
	MemberEvents(name string) []v1alpha1.Event
}

// fleetView is the REST API's view of the members of a fleet on etcd:
// every member of the fleet, not only this node's. A member this node runs
// comes from the controllers with its full status and status.nodeName; one
// bound to another node shows that node and Ready=Unknown (OnAnotherNode:
// its status is kept there, and crossing nodes for it is not built; or
// NodeLost when that node's lease expired); an
// unbound one shows Pending and Ready=False (Unschedulable) with why.
type fleetView struct {
	local localMembers
	store *etcdstore.Store
	node  string
}

var (
	_ mcp.MemberSource = fleetView{}
	_ mcp.MemberWaiter = fleetView{}
)

// WaitFor blocks until cond holds for the fleet's members or ctx ends,
// woken by every change of this node's members' status and of the fleet
// (members, bindings, nodes).
func (v fleetView) WaitFor(ctx context.Context, cond func([]v1alpha1.Member) bool) error {
	for {
		local, fleet := v.local.Changed(), v.store.FleetChanged()
		if cond(v.Members()) {
			return nil
		}
		select {
		case <-local:
		case <-fleet:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (v fleetView) Members() []v1alpha1.Member {
	own := map[string]v1alpha1.Member{}
	for _, m := range v.local.Members() {
		own[m.Name] = m
	}
	f := v.store.Fleet()
	out := make([]v1alpha1.Member, 0, len(f.Members))
	for _, m := range f.Members {
		if o, ok := own[m.Name]; ok {
			o.Status.NodeName = v.node
			out = append(out, o)
			continue
		}
		out = append(out, v.remote(&f, m))
	}
	return out
}

func (v fleetView) Member(name string) (v1alpha1.Member, bool) {
	if m, ok := v.local.Member(name); ok {
		m.Status.NodeName = v.node
		return m, true
	}
	f := v.store.Fleet()
	for _, m := range f.Members {
		if m.Name == name {
			return v.remote(&f, m), true
		}
	}
	return v1alpha1.Member{}, false
}

func (v fleetView) MemberEvents(name string) []v1alpha1.Event { return v.local.MemberEvents(name) }

// remote is a member this node does not run, as far as the fleet says.
func (v fleetView) remote(f *etcdstore.Fleet, m *v1alpha1.Member) v1alpha1.Member {
	out := *m.DeepCopy()
	node, why, _ := f.Placement(m.Name)
	ready := v1alpha1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: m.Generation}
	st := v1alpha1.MemberStatus{ObservedGeneration: m.Generation}
	if m.CreationTimestamp != nil {
		ready.LastTransitionTime = *m.CreationTimestamp
	}
	if since, lost := f.Lost[node]; node != "" && lost {
		ready.Status, ready.Reason, ready.LastTransitionTime = v1alpha1.ConditionUnknown, ReasonNodeLost, since.UTC().Truncate(time.Second)
		ready.Message = "bound to node " + node + ", whose lease expired at " + since.UTC().Format(time.RFC3339)
		if m.Spec.NodeName == node {
			ready.Message += "; spec.nodeName pins it there, so it waits for the node"
		} else {
			ready.Message += "; it is rescheduled once the node has been lost for --reschedule-after"
		}
		st.NodeName, st.Conditions = node, []v1alpha1.Condition{ready}
		out.Status = st
		return out
	}
	if node != "" {
		ready.Status, ready.Reason = v1alpha1.ConditionUnknown, ReasonOnAnotherNode
		ready.Message = "runs on node " + node + ", which keeps its status (status across nodes is not built yet)"
		st.NodeName, st.Conditions = node, []v1alpha1.Condition{ready}
		out.Status = st
		return out
	}
	ready.Status, ready.Reason, ready.Message = v1alpha1.ConditionFalse, ReasonUnschedulable, why
	st.Phase, st.Conditions = v1alpha1.PhasePending, []v1alpha1.Condition{ready}
	out.Status = st
	return out
}
