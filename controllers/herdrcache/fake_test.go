package herdrcache

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/fleetd-dev/fleetd/herdr"
)

// fakeHerdr is an in-memory Source: a herdr whose state the test sets and
// whose current stream the test feeds.
type fakeHerdr struct {
	mu         sync.Mutex
	down       bool // every call fails as if herdr were not there
	workspaces []herdr.WorkspaceInfo
	tabs       []herdr.TabInfo
	panes      []herdr.PaneInfo
	agents     []herdr.AgentInfo
	calls      map[string]int
	subs       [][]string // the per-pane entries of every accepted subscription
	kinds      []string   // the lifecycle types of the last subscription asked for
	stream     *fakeStream
	// duringList, if set, runs inside pane.list (a listing in progress).
	duringList func()
	// duringAgentList, if set, runs inside agent.list once the agents
	// are read (a listing on its way back).
	duringAgentList func()
	// beforeSubscribe, if set, runs inside events.subscribe before the
	// stream exists: a change herdr makes then reaches no subscriber.
	beforeSubscribe func()
	// order is every call's method, in order.
	order []string
	// pong is what ping answers; nil is protocol 20. pingErr, if set, is
	// returned with it (a client refusing the protocol returns both).
	pong    *herdr.Pong
	pingErr error
}

func newFake() *fakeHerdr { return &fakeHerdr{calls: map[string]int{}} }

func errDown(method string) error {
	return &herdr.TransportError{Method: method, Reason: herdr.ReasonUnavailable, Err: fmt.Errorf("connection refused")}
}

func (f *fakeHerdr) call(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	f.order = append(f.order, method)
	if f.down {
		return errDown(method)
	}
	return nil
}

func (f *fakeHerdr) Ping(context.Context) (*herdr.Pong, error) {
	if err := f.call("ping"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pong != nil {
		p := *f.pong
		return &p, f.pingErr
	}
	return &herdr.Pong{Version: "0.9.3", Protocol: herdr.LatestProtocol}, nil
}

func (f *fakeHerdr) ListWorkspaces(context.Context) ([]herdr.WorkspaceInfo, error) {
	if err := f.call("workspace.list"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.workspaces), nil
}

func (f *fakeHerdr) ListTabs(_ context.Context, ws string) ([]herdr.TabInfo, error) {
	if err := f.call("tab.list"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []herdr.TabInfo
	for _, t := range f.tabs {
		if t.WorkspaceID == ws {
			out = append(out, t)
		}
	}
	return out, nil
}

func (f *fakeHerdr) ListPanes(context.Context, string) ([]herdr.PaneInfo, error) {
	if err := f.call("pane.list"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	out, hook := slices.Clone(f.panes), f.duringList
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return out, nil
}

func (f *fakeHerdr) ListAgents(context.Context) ([]herdr.AgentInfo, error) {
	if err := f.call("agent.list"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	out, hook := slices.Clone(f.agents), f.duringAgentList
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return out, nil
}

// Subscribe refuses a per-pane entry for a pane it does not have, like
// herdr (pane_not_found).
func (f *fakeHerdr) Subscribe(ctx context.Context, subs []herdr.Subscription) (Stream, error) {
	if err := f.call("events.subscribe"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	hook := f.beforeSubscribe
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var panes []string
	f.kinds = nil
	for _, s := range subs {
		if s.PaneID == "" {
			f.kinds = append(f.kinds, s.Type)
			continue
		}
		if !slices.ContainsFunc(f.panes, func(p herdr.PaneInfo) bool { return p.PaneID == s.PaneID }) {
			return nil, &herdr.Error{Method: "events.subscribe", Code: "pane_not_found", Message: s.PaneID}
		}
		panes = append(panes, s.PaneID)
	}
	f.subs = append(f.subs, panes)
	st := &fakeStream{events: make(chan herdr.Event, 64)}
	f.stream = st
	go func() {
		<-ctx.Done()
		st.end(nil)
	}()
	return st, nil
}

// send delivers ev on the current stream.
func (f *fakeHerdr) send(ev herdr.Event) {
	f.mu.Lock()
	st := f.stream
	f.mu.Unlock()
	st.send(ev)
}

// drop ends the current stream with err.
func (f *fakeHerdr) drop(err error) {
	f.mu.Lock()
	st := f.stream
	f.mu.Unlock()
	st.end(err)
}

func (f *fakeHerdr) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	if down && f.stream != nil {
		go f.stream.end(errDown("events.subscribe"))
	}
}

func (f *fakeHerdr) callCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.calls {
		out[k] = v
	}
	return out
}

// subscribedKinds returns the lifecycle types of the last subscription.
func (f *fakeHerdr) subscribedKinds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.kinds)
}

func (f *fakeHerdr) subscriptions() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.subs)
}

// addPane adds a pane (with an agent in the given status, if not "") to the
// fake herdr.
func (f *fakeHerdr) addPane(p herdr.PaneInfo, status herdr.AgentStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.panes = append(f.panes, p)
	if status != "" {
		f.agents = append(f.agents, herdr.AgentInfo{PaneID: p.PaneID, TerminalID: p.TerminalID, TabID: p.TabID,
			WorkspaceID: p.WorkspaceID, AgentStatus: status, Name: "agent-" + p.PaneID})
	}
}

// closeTab removes a tab and its panes and agents from the fake herdr,
// sending nothing: the caller decides which events herdr would send.
func (f *fakeHerdr) closeTab(tabID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tabs = slices.DeleteFunc(f.tabs, func(t herdr.TabInfo) bool { return t.TabID == tabID })
	f.panes = slices.DeleteFunc(f.panes, func(p herdr.PaneInfo) bool { return p.TabID == tabID })
	f.agents = slices.DeleteFunc(f.agents, func(a herdr.AgentInfo) bool { return a.TabID == tabID })
}

// callOrder returns every call's method, in order.
func (f *fakeHerdr) callOrder() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.order)
}

// snapshotHerdr is a fake herdr that also answers session.snapshot, with
// err if set.
type snapshotHerdr struct {
	*fakeHerdr
	err error
}

func (f snapshotHerdr) Snapshot(context.Context) (*Snapshot, error) {
	if err := f.call("session.snapshot"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return &Snapshot{Workspaces: slices.Clone(f.workspaces), Tabs: slices.Clone(f.tabs),
		Panes: slices.Clone(f.panes), Agents: slices.Clone(f.agents)}, nil
}

func (f *fakeHerdr) setStatus(pane string, status herdr.AgentStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.agents {
		if f.agents[i].PaneID == pane {
			f.agents[i].AgentStatus = status
		}
	}
}

type fakeStream struct {
	mu     sync.Mutex
	events chan herdr.Event
	ended  bool
	err    error
}

func (s *fakeStream) Events() <-chan herdr.Event { return s.events }

func (s *fakeStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *fakeStream) Close() error {
	s.end(nil)
	return nil
}

func (s *fakeStream) send(ev herdr.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.events <- ev
	}
}

func (s *fakeStream) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	close(s.events)
}
