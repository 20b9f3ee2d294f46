package daemon

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/mcp"
)

// Reasons of the Ready condition the fleet view gives a member this node
// does not run.
const (
	// ReasonUnschedulable: no node can take the member; the message says
	// why (the scheduler's own words, from the same placement rule).
	ReasonUnschedulable = "Unschedulable"
	// ReasonOnAnotherNode: the member is bound to another node, whose
	// status of it is not shown here; the message says why (not published
	// yet, its herdr does not answer, this node cannot read etcd).
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

// fleetView is the REST API's (and the console's) view of the members of
// a fleet on etcd: every member of the fleet, not only this node's. A
// member this node runs comes from the controllers with its full status
// and status.nodeName. One bound to another node shows the status that
// node published (fleetstatus.go) when the publisher is the node the
// member is bound to, under the binding this node sees, and that node is
// Ready; otherwise Ready=Unknown: NodeLost when that node's lease expired,
// OnAnotherNode (with why its status is not shown) else. An unbound one
// shows Pending and Ready=False (Unschedulable) with why.
type fleetView struct {
	local   localMembers
	store   *etcdstore.Store
	node    string
	changes *changes // local, fleet and published statuses
}

func newFleetView(local localMembers, st *etcdstore.Store, node string) *fleetView {
	return &fleetView{local: local, store: st, node: node, changes: newChanges(local.Changed, st.FleetChanged, st.StatusChanged)}
}

var (
	_ mcp.MemberSource = (*fleetView)(nil)
	_ mcp.MemberWaiter = (*fleetView)(nil)
)

// Changed is closed at the next change of this node's members, of the
// fleet (members, bindings, nodes) or of a published status. It needs Run.
func (v *fleetView) Changed() <-chan struct{} { return v.changes.Changed() }

// Run feeds Changed until ctx ends.
func (v *fleetView) Run(ctx context.Context) { v.changes.Run(ctx) }

// WaitFor blocks until cond holds for the fleet's members or ctx ends,
// woken by every change of this node's members' status, of the fleet
// (members, bindings, nodes) and of the statuses other nodes publish.
func (v *fleetView) WaitFor(ctx context.Context, cond func([]v1alpha1.Member) bool) error {
	for {
		local, fleet, status := v.local.Changed(), v.store.FleetChanged(), v.store.StatusChanged()
		if cond(v.Members()) {
			return nil
		}
		select {
		case <-local:
		case <-fleet:
		case <-status:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (v *fleetView) Members() []v1alpha1.Member {
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

func (v *fleetView) Member(name string) (v1alpha1.Member, bool) {
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

// MemberEvents are this node's events of a member; a member another node
// runs has its events there.
func (v *fleetView) MemberEvents(name string) []v1alpha1.Event { return v.local.MemberEvents(name) }

// RemoteWorker returns the messaging status (what bridge_status shows) of
// a member another node runs, as that node published it, when the view
// shows that node's status of the member (see fleetView); false for a
// member this node runs, an unknown one, or one whose status is not
// shown. Cross-node messaging (bridge_status) reads it for remote members.
func (v *fleetView) RemoteWorker(name string) (messaging.WorkerStatus, bool) {
	if _, ok := v.local.Member(name); ok {
		return messaging.WorkerStatus{}, false
	}
	pub, why, found := v.store.MemberStatus(name)
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

// remote is a member this node does not run, as far as the fleet says.
func (v *fleetView) remote(f *etcdstore.Fleet, m *v1alpha1.Member) v1alpha1.Member {
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
		pub, why := v.store.BoundStatus(f, m)
		if why == "" {
			out.Status = pub.Status
			out.Status.NodeName = node
			return out
		}
		ready.Status, ready.Reason = v1alpha1.ConditionUnknown, ReasonOnAnotherNode
		ready.Message = "runs on node " + node + ", which keeps its status; " + why
		st.NodeName, st.Conditions = node, []v1alpha1.Condition{ready}
		out.Status = st
		return out
	}
	ready.Status, ready.Reason, ready.Message = v1alpha1.ConditionFalse, ReasonUnschedulable, why
	st.Phase, st.Conditions = v1alpha1.PhasePending, []v1alpha1.Condition{ready}
	out.Status = st
	return out
}

// changes merges change signals — each a func returning a channel closed
// at the next change, handed out anew after each — into one (Changed),
// fed by Run.
type changes struct {
	sources []func() <-chan struct{}

	mu   sync.Mutex
	ch   chan struct{}
	next []<-chan struct{} // the sources' channels Run waits on first
}

func newChanges(sources ...func() <-chan struct{}) *changes {
	c := &changes{sources: sources, ch: make(chan struct{})}
	c.next = c.collect()
	return c
}

func (c *changes) collect() []<-chan struct{} {
	out := make([]<-chan struct{}, len(c.sources))
	for i, s := range c.sources {
		out[i] = s()
	}
	return out
}

// Changed returns a channel closed at the next change of any source.
func (c *changes) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

// Run closes Changed's channel after every change of a source until ctx
// ends. The sources' next channels are taken before the close, so a change
// that comes while it closes is not missed.
func (c *changes) Run(ctx context.Context) {
	c.mu.Lock()
	chans := c.next
	c.mu.Unlock()
	cases := make([]reflect.SelectCase, len(chans)+1)
	for {
		cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
		for i, ch := range chans {
			cases[i+1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)}
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			return
		}
		chans = c.collect()
		c.mu.Lock()
		close(c.ch)
		c.ch = make(chan struct{})
		c.mu.Unlock()
	}
}
