package fleet

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/scheduler"
)

// View is the REST API's (and bridge_list's, `?wait=true`'s and the
// console's) view of the members of a fleet on etcd: every member of the
// fleet, not only this node's. A member this node runs comes from the
// controllers with its full status and status.nodeName. One bound to
// another node shows the status that node published when the publisher is
// the node the member is bound to, under the binding this node sees, and
// that node is Ready ([State.BoundStatus]); otherwise Ready=Unknown:
// NodeLost when that node's lease expired, OnAnotherNode (with why its
// status is not shown) else. An unbound one shows Pending and Ready=False
// (Unschedulable) with why.
type View struct {
	local LocalMembers
	state *State
	node  string
	// changed follows the fleet and the statuses; Run forwards the
	// controllers' changes into it.
	changed notify.Signal
	// remote follows what a remote member's report depends on: the nodes
	// and the statuses.
	remote notify.Signal
}

// NewView is the fleet seen from node, whose own members local has.
func NewView(local LocalMembers, state *State, node string) *View {
	v := &View{local: local, state: state, node: node}
	v.changed.Follow(&state.changed, state.statuses.signal())
	v.remote.Follow(&state.nodes.changed, state.statuses.signal())
	return v
}

// Run feeds Changed with the controllers' changes until ctx ends.
func (v *View) Run(ctx context.Context) { v.changed.Forward(ctx, v.local) }

// Changed is closed at the next change of this node's members, of the
// fleet (members, bindings, nodes) or of a published status. It needs Run.
func (v *View) Changed() <-chan struct{} { return v.changed.Changed() }

// WaitFor blocks until cond holds for the fleet's members or ctx ends,
// woken by every change of this node's members' status, of the fleet
// (members, bindings, nodes) and of the statuses other nodes publish.
func (v *View) WaitFor(ctx context.Context, cond func([]v1alpha1.Member) bool) error {
	for {
		local, fleet := v.local.Changed(), v.changed.Changed()
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

// Members returns every member of the fleet, sorted by name, and the
// members this node runs that the fleet lacks: deleted from it while
// this node still closes their tab (Terminating while their agent
// finishes what it was given), held by the node's prune hold, or kept
// while its store is lost (package etcdstore).
func (v *View) Members() []v1alpha1.Member {
	own := map[string]v1alpha1.Member{}
	for _, m := range v.local.Members() {
		own[m.Name] = m
	}
	f := v.state.Fleet()
	out := make([]v1alpha1.Member, 0, len(f.Members))
	for _, m := range f.Members {
		if o, ok := own[m.Name]; ok {
			o.Status.NodeName = v.node
			out = append(out, o)
			delete(own, m.Name)
			continue
		}
		out = append(out, v.remoteMember(&f, m))
	}
	for _, o := range own {
		o.Status.NodeName = v.node
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b v1alpha1.Member) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Member returns one member of the fleet.
func (v *View) Member(name string) (v1alpha1.Member, bool) {
	if m, ok := v.local.Member(name); ok {
		m.Status.NodeName = v.node
		return m, true
	}
	f := v.state.Fleet()
	for _, m := range f.Members {
		if m.Name == name {
			return v.remoteMember(&f, m), true
		}
	}
	return v1alpha1.Member{}, false
}

// MemberEvents are this node's events of a member; a member another node
// runs has its events there.
func (v *View) MemberEvents(name string) []v1alpha1.Event { return v.local.MemberEvents(name) }

// RemoteWorker returns the messaging status (what bridge_status shows) of
// a member another node runs, as that node published it, when the view
// shows that node's status of the member; false for a member this node
// runs, an unknown one, or one whose status is not shown. Cross-node
// messaging (bridge_status) reads it for remote members.
func (v *View) RemoteWorker(name string) (messaging.WorkerStatus, bool) {
	if _, ok := v.local.Member(name); ok {
		return messaging.WorkerStatus{}, false
	}
	pub, why, found := v.state.MemberStatus(name)
	if !found || why != "" || len(pub.Worker) == 0 {
		return messaging.WorkerStatus{}, false
	}
	w, err := decodeWorker(pub.Worker)
	if err != nil {
		return messaging.WorkerStatus{}, false
	}
	w.Worker = name
	return w, true
}

// WaitStopped returns once m's node (m.Status.NodeName, another node: m as
// the view showed it before its definition was deleted) reports that it
// no longer runs m — its published status of m is gone, or is of another
// member or publisher — or is lost (its lease expired: it runs nothing
// the fleet can see, and closes m's pane if it comes back). It returns an
// error saying so when ctx ends first. Every node closes the pane of a
// member deleted from the desired state and then stops publishing its
// status, so the report comes from the node that runs it, whatever node
// the stop was asked of.
func (v *View) WaitStopped(ctx context.Context, m v1alpha1.Member) error {
	node := m.Status.NodeName
	err := notify.Wait(ctx, &v.remote, func() bool {
		if _, lost := v.state.nodes.Lost()[node]; lost {
			return true
		}
		pub, ok := v.state.statuses.Status(m.Name)
		return !ok || pub.Node != node || pub.MemberUID != m.UID
	})
	if err != nil {
		return fmt.Errorf("node %s has not reported member %s stopped: %w", node, m.Name, err)
	}
	return nil
}

// remoteMember is a member this node does not run, as far as the fleet
// says.
func (v *View) remoteMember(f *scheduler.Fleet, m *v1alpha1.Member) v1alpha1.Member {
	out := *m.DeepCopy()
	p, _ := f.Placement(m.Name)
	node := p.Node
	ready := v1alpha1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: m.Generation}
	st := v1alpha1.MemberStatus{ObservedGeneration: m.Generation}
	if m.CreationTimestamp != nil {
		ready.LastTransitionTime = *m.CreationTimestamp
	}
	if since, lost := f.Lost[node]; node != "" && lost {
		ready.Status, ready.Reason, ready.LastTransitionTime = v1alpha1.ConditionUnknown, v1alpha1.ReasonNodeLost, since.UTC().Truncate(time.Second)
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
		pub, why := v.state.BoundStatus(f, m)
		if why == "" {
			out.Status = pub.Status
			out.Status.NodeName = node
			return out
		}
		ready.Status, ready.Reason = v1alpha1.ConditionUnknown, v1alpha1.ReasonOnAnotherNode
		ready.Message = "runs on node " + node + ", which keeps its status; " + why
		st.NodeName, st.Conditions = node, []v1alpha1.Condition{ready}
		out.Status = st
		return out
	}
	ready.Status, ready.Reason, ready.Message = v1alpha1.ConditionFalse, v1alpha1.ReasonUnschedulable, p.Why
	if p.Next != "" {
		ready.Reason, ready.Message = v1alpha1.ReasonScheduling, "waiting for the scheduler to bind it to node "+p.Next
	}
	st.Phase, st.Conditions = v1alpha1.PhasePending, []v1alpha1.Condition{ready}
	out.Status = st
	return out
}
