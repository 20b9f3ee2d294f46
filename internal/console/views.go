package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/tail"
)

// Kinds of what needs a person, in the order Needs you lists them.
const (
	needDialog   = "dialog"   // an agent waits at a dialog (AwaitingInput)
	needBlocked  = "blocked"  // an agent is blocked at a prompt while running
	needQuestion = "question" // a worker's bridge_ask waits for the primary
	needHerdr    = "herdr"    // herdr is unreachable
	needDegraded = "degraded" // a member is Degraded, crash-looping or Failed
)

// need is one entry of Needs you.
type need struct {
	// Key names the entry across updates (the page notifies on new keys).
	Key, Kind, Member, Text string
	// TurnID is the question's turn, answered with POST /ui/answer.
	TurnID string
	Since  time.Time
}

type memberRow struct {
	Name, Phase, AgentStatus, Node string
	Restarts                       int32
	Created                        time.Time
	Needs                          bool
}

type overviewView struct {
	Needs []need
	// Rollouts are the profiles whose rollout is not complete.
	Rollouts []rolloutRow
	Members  []memberRow
	Inbox    []messaging.Message
	More     int
	Now      time.Time
}

// rolloutRow is a profile whose rollout to its members is under way,
// paused or stopped, and what each member it has not finished waits for.
type rolloutRow struct {
	Profile, State, Message string
	Members, Updated        int32
	Waits                   []rolloutWait
}

// rolloutWait is one member a rollout waits for, and why: its UpToDate
// condition (waiting for idle, for its turn), or its new agent's Ready
// condition.
type rolloutWait struct {
	Member, Reason, Message string
}

type memberView struct {
	Member   v1alpha1.Member
	Spec     string
	Events   []v1alpha1.Event
	Worker   messaging.WorkerStatus
	Needs    []need
	Messages []messaging.Message // its mail in the primary's mailbox
	Tail     string
	TailErr  string
	// Remote is the node that runs the member when it is not this one:
	// its terminal is in that node's herdr.
	Remote string
}

// pageView is a whole page: the layout around Body (an overviewView,
// memberView, applyView or notFound).
type pageView struct {
	Title string
	CSRF  string
	Body  any
	// Member is the member a member page shows.
	Member string
}

// maxPromptReads bounds the terminal reads of one overview: the screens of
// at most this many blocked agents are shown.
const maxPromptReads = 8

// overview builds the fleet overview from the controllers and the core. A
// blocked agent's entry shows the end of its screen (what it asks), read
// once per state of the agent when tails caches the reads.
func (c *Console) overview(ctx context.Context, tails tailCaches) overviewView {
	v := overviewView{Now: c.o.Clock.Now()}
	members := c.o.Members.Members()
	inbox := c.inbox(ctx)
	v.Inbox, v.More = inbox.Messages, inbox.More
	if c.o.Herdr != nil {
		if err := c.o.Herdr(); err != nil {
			v.Needs = append(v.Needs, need{Key: "herdr", Kind: needHerdr, Text: "herdr is unreachable: " + err.Error()})
		}
	}
	needy := map[string]bool{}
	reads := 0
	for _, m := range members {
		ns := memberNeeds(m)
		for i, n := range ns {
			needy[n.Member] = true
			if n.Kind == needBlocked && reads < maxPromptReads && c.remote(m) == "" {
				reads++
				if screen, _ := c.tail(ctx, m, c.o.Messages.Status(m.Name), tails.of(m.Name)); screen != "" {
					ns[i].Text = "the agent is blocked at a prompt: " + tail.Excerpt(screen, promptLines)
				}
			}
		}
		v.Needs = append(v.Needs, ns...)
	}
	tails.keep(members)
	for _, n := range c.questions(inbox.Messages) {
		needy[n.Member] = true
		v.Needs = append(v.Needs, n)
	}
	sortNeeds(v.Needs)
	v.Rollouts = c.rollouts(members)
	for _, m := range members {
		row := memberRow{Name: m.Name, Phase: m.DisplayPhase(), AgentStatus: m.Status.AgentStatus, Restarts: m.Status.Restarts,
			Node: m.Status.NodeName, Needs: needy[m.Name]}
		if m.CreationTimestamp != nil {
			row.Created = *m.CreationTimestamp
		}
		v.Members = append(v.Members, row)
	}
	return v
}

// rollouts are the profiles whose rollout is not complete, with the
// members it waits for (from members, the ones the overview shows).
func (c *Console) rollouts(members []v1alpha1.Member) []rolloutRow {
	if c.o.Profiles == nil {
		return nil
	}
	var rows []rolloutRow
	for _, p := range c.o.Profiles() {
		progressing := condition(p.Status.Conditions, v1alpha1.ConditionProgressing)
		if progressing == nil || progressing.Reason == v1alpha1.ReasonRolloutComplete {
			continue
		}
		row := rolloutRow{Profile: p.Name, State: progressing.Reason, Message: progressing.Message,
			Members: p.Status.Members, Updated: p.Status.UpdatedMembers}
		for _, m := range members {
			if m.Spec.Profile != p.Name || m.Spec.Paused {
				continue
			}
			if up := condition(m.Status.Conditions, v1alpha1.ConditionUpToDate); up != nil && up.Status == v1alpha1.ConditionFalse {
				row.Waits = append(row.Waits, rolloutWait{Member: m.Name, Reason: up.Reason, Message: up.Message})
			} else if ready := condition(m.Status.Conditions, v1alpha1.ConditionReady); ready != nil && ready.Status != v1alpha1.ConditionTrue {
				row.Waits = append(row.Waits, rolloutWait{Member: m.Name, Reason: ready.Reason, Message: ready.Message})
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func (c *Console) inbox(ctx context.Context) messaging.PollPage {
	p, err := c.o.Messages.PollPage(ctx, c.o.PrimaryName, messaging.PollRequest{Limit: inboxLimit})
	if err != nil {
		c.o.Logger.Warn("console: read the primary's mailbox", "err", err)
	}
	return p
}

// memberNeeds lists what a member needs of a person, from its status.
func memberNeeds(m v1alpha1.Member) []need {
	var out []need
	ready := condition(m.Status.Conditions, v1alpha1.ConditionReady)
	switch {
	case ready != nil && ready.Reason == v1alpha1.ReasonAwaitingInput:
		out = append(out, need{Key: "dialog/" + m.Name, Kind: needDialog, Member: m.Name, Text: ready.Message, Since: ready.LastTransitionTime})
	case m.Status.AgentStatus == "blocked":
		out = append(out, need{Key: "blocked/" + m.Name, Kind: needBlocked, Member: m.Name,
			Text: "the agent is blocked at a prompt; its terminal shows what it asks"})
	}
	deg := condition(m.Status.Conditions, v1alpha1.ConditionDegraded)
	switch {
	case m.Status.Phase == v1alpha1.PhaseFailed:
		out = append(out, need{Key: "degraded/" + m.Name, Kind: needDegraded, Member: m.Name, Text: "Failed: " + cmp.Or(m.Status.LastError, reasonText(ready))})
	case m.Status.Phase == v1alpha1.PhaseDegraded || (deg != nil && deg.Status == v1alpha1.ConditionTrue) ||
		(ready != nil && ready.Reason == v1alpha1.ReasonCrashLoop):
		text := reasonText(deg)
		if deg == nil || deg.Status != v1alpha1.ConditionTrue {
			text = reasonText(ready)
		}
		out = append(out, need{Key: "degraded/" + m.Name, Kind: needDegraded, Member: m.Name,
			Text: fmt.Sprintf("%s (%d restarts): %s", cmp.Or(m.Status.Phase, "Degraded"), m.Status.Restarts, cmp.Or(text, m.Status.LastError))})
	}
	return out
}

// questions lists the workers' questions that wait for the primary: open
// turns of the primary's whose worker asks. The question's age is that of
// its mail when the mailbox holds it, else the turn's.
func (c *Console) questions(inbox []messaging.Message) []need {
	asked := map[string]time.Time{}
	for _, m := range inbox {
		if m.Kind == messaging.KindQuestion {
			asked[m.TurnID] = m.CreatedAt
		}
	}
	var out []need
	for _, w := range c.o.Messages.Busy() {
		for _, t := range c.o.Messages.Status(w).OpenTurns {
			if !t.Asking || t.Caller != c.o.PrimaryName {
				continue
			}
			since, ok := asked[t.ID]
			if !ok {
				since = t.CreatedAt
			}
			out = append(out, need{Key: "question/" + t.ID, Kind: needQuestion, Member: w, Text: t.Question, TurnID: t.ID, Since: since})
		}
	}
	return out
}

var needOrder = []string{needDialog, needBlocked, needQuestion, needHerdr, needDegraded}

func sortNeeds(ns []need) {
	sort.SliceStable(ns, func(i, j int) bool {
		a, b := slices.Index(needOrder, ns[i].Kind), slices.Index(needOrder, ns[j].Kind)
		if a != b {
			return a < b
		}
		return ns[i].Member < ns[j].Member
	})
}

func condition(cs []v1alpha1.Condition, typ string) *v1alpha1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func reasonText(c *v1alpha1.Condition) string {
	if c == nil {
		return ""
	}
	if c.Message == "" {
		return c.Reason
	}
	return c.Reason + ": " + c.Message
}

// member builds a member page; ok is false for an unknown member. tails,
// when not nil, keeps the last tail read for the stream that renders the
// page again and again.
func (c *Console) member(ctx context.Context, name string, tails tailCaches) (memberView, bool) {
	m, ok := c.o.Members.Member(name)
	if !ok {
		return memberView{}, false
	}
	v := memberView{Member: m, Events: c.o.Members.MemberEvents(name), Worker: c.o.Messages.Status(name)}
	v.Spec = specYAML(&m)
	v.Needs = memberNeeds(m)
	inbox := c.inbox(ctx)
	for _, q := range c.questions(inbox.Messages) {
		if q.Member == name {
			v.Needs = append(v.Needs, q)
		}
	}
	for _, msg := range inbox.Messages {
		if msg.From == name {
			v.Messages = append(v.Messages, msg)
		}
	}
	if v.Remote = c.remote(m); v.Remote == "" {
		v.Tail, v.TailErr = c.tail(ctx, m, v.Worker, tails.of(name))
	}
	return v, true
}

// remote returns the node that runs m when it is another than this one;
// "" for a member this node runs (or any, with one node).
func (c *Console) remote(m v1alpha1.Member) string {
	if c.o.Node == "" || m.Status.NodeName == "" || m.Status.NodeName == c.o.Node {
		return ""
	}
	return m.Status.NodeName
}

// tailCache is the last terminal tail a stream read for a member, and the
// state of the agent it was read in.
type tailCache struct {
	key, text, err string
}

// tailCaches are a stream's tail reads by member name; nil caches nothing.
type tailCaches map[string]*tailCache

func (tc tailCaches) of(name string) *tailCache {
	if tc == nil {
		return nil
	}
	if tc[name] == nil {
		tc[name] = &tailCache{}
	}
	return tc[name]
}

// keep forgets the reads of members that are gone.
func (tc tailCaches) keep(members []v1alpha1.Member) {
	names := map[string]bool{}
	for _, m := range members {
		names[m.Name] = true
	}
	for name := range tc {
		if !names[name] {
			delete(tc, name)
		}
	}
}

// promptLines is how much of a blocked agent's screen Needs you shows.
const promptLines = 4

// tail reads the member's terminal tail, once per state of its agent
// (pane, status, state-change sequence, last delivery) when a cache is
// given: a stream renders on every change in the fleet, and reading herdr
// for each would be one read per change of any member.
func (c *Console) tail(ctx context.Context, m v1alpha1.Member, w messaging.WorkerStatus, cache *tailCache) (string, string) {
	if c.o.Tails == nil || m.Status.PaneID == "" {
		return "", ""
	}
	key := fmt.Sprintf("%s/%s/%d", m.Status.PaneID, m.Status.AgentStatus, w.StateChangeSeq)
	if w.LastDelivery != nil {
		key += "/" + w.LastDelivery.MessageID
	}
	if cache != nil && cache.key == key {
		return cache.text, cache.err
	}
	tctx, cancel := context.WithTimeout(ctx, tailTimeout)
	defer cancel()
	text, err := c.o.Tails.ReadTail(tctx, m.Status.PaneID, tailLines)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if cache != nil {
		*cache = tailCache{key: key, text: text, err: msg}
	}
	return text, msg
}

// specYAML shows an object as its manifest would say it: kind, metadata
// name, labels and annotations, and spec — nothing fleetd owns.
func specYAML(obj v1alpha1.Object) string {
	var spec struct {
		Spec any `json:"spec"`
	}
	raw, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(raw, &spec)
	}
	if err != nil {
		return "# " + err.Error()
	}
	doc := map[string]any{"apiVersion": v1alpha1.GroupVersion, "kind": obj.GetObjectKind(), "spec": spec.Spec}
	m := obj.GetMeta()
	meta := map[string]any{"name": m.Name}
	if len(m.Labels) > 0 {
		meta["labels"] = m.Labels
	}
	if len(m.Annotations) > 0 {
		meta["annotations"] = m.Annotations
	}
	doc["metadata"] = meta
	b, err := sigsyaml.Marshal(doc)
	if err != nil {
		return "# " + err.Error()
	}
	return string(b)
}

func (c *Console) overviewPage(w http.ResponseWriter, r *http.Request, s session) {
	c.render(w, http.StatusOK, "layout", pageView{Title: "fleet", CSRF: s.csrf, Body: c.overview(r.Context(), nil)})
}

func (c *Console) memberPage(w http.ResponseWriter, r *http.Request, s session) {
	name := r.PathValue("name")
	v, found := c.member(r.Context(), name, nil)
	if !found {
		c.render(w, http.StatusNotFound, "layout", pageView{Title: "not found", CSRF: s.csrf, Body: notFound{Name: name}})
		return
	}
	c.render(w, http.StatusOK, "layout", pageView{Title: name, CSRF: s.csrf, Member: name, Body: v})
}

type notFound struct{ Name string }

type applyView struct{}

func (c *Console) applyPage(w http.ResponseWriter, _ *http.Request, s session) {
	c.render(w, http.StatusOK, "layout", pageView{Title: "apply", CSRF: s.csrf, Body: applyView{}})
}

func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := c.pages.ExecuteTemplate(&buf, name, data); err != nil {
		c.o.Logger.Error("console: render", "template", name, "err", err)
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fragment renders the live part of a page: the overview, or a member.
func (c *Console) fragment(ctx context.Context, member string, tails tailCaches) (string, bool) {
	var buf bytes.Buffer
	var err error
	if member == "" {
		err = c.pages.ExecuteTemplate(&buf, "overview", c.overview(ctx, tails))
	} else {
		v, found := c.member(ctx, member, tails)
		if !found {
			return "", false
		}
		err = c.pages.ExecuteTemplate(&buf, "member", v)
	}
	if err != nil {
		c.o.Logger.Error("console: render", "err", err)
		return "", false
	}
	return buf.String(), true
}

// What a page shows of a text someone else wrote — a worker's reply or
// question, an agent's screen, an error — is bounded, so that a page (and
// every event that carries one) stays small however much a worker writes:
// maxShownBytes of each text, a link to read the rest where there is one
// (GET /ui/messages/{id}, /ui/questions/{turn}: text.go), briefBytes in an
// attribute, maxSpecBytes of a member's spec.
const (
	maxShownBytes = 2 << 10
	briefBytes    = 160
	maxSpecBytes  = 16 << 10
)

// clipped is a text cut to what a page shows, and how many bytes of it
// are not shown.
type clipped struct {
	Text string
	More int
}

// clipTo cuts s to at most n bytes, at a character boundary.
func clipTo(s string, n int) clipped {
	if len(s) <= n {
		return clipped{Text: s}
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return clipped{Text: s[:cut] + "…", More: len(s) - cut}
}

// moreLink is the "more" template's data: a clipped text and where to read
// all of it ("" when nowhere).
type moreLink struct {
	More int
	Href string
}

var funcs = template.FuncMap{
	"clip":     func(s string) clipped { return clipTo(s, maxShownBytes) },
	"clipSpec": func(s string) clipped { return clipTo(s, maxSpecBytes) },
	"brief":    func(s string) string { return clipTo(s, briefBytes).Text },
	"more": func(c clipped, prefix, id string) moreLink {
		if prefix == "" || id == "" {
			return moreLink{More: c.More}
		}
		return moreLink{More: c.More, Href: prefix + url.PathEscape(id)}
	},
	"age": func(now, t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return shortDuration(now.Sub(t))
	},
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	// clock is a short time for a person: month, day, time of day, UTC.
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("Jan 2 15:04:05 UTC")
	},
	"lower": strings.ToLower,
	"kindOf": func(t any) string {
		switch t.(type) {
		case overviewView:
			return "overview"
		case memberView:
			return "member"
		case applyView:
			return "apply"
		case notFound:
			return "notfound"
		}
		return ""
	},
}

// shortDuration is a duration as `fleetd get` shows an age: 45s, 12m, 3h, 2d.
func shortDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
