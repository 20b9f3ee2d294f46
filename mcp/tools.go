package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// Messenger is the messaging core as the tools use it (*messaging.Core).
type Messenger interface {
	Send(ctx context.Context, req messaging.SendRequest) (messaging.SendResult, error)
	Reply(ctx context.Context, worker, content string, final bool) (messaging.ReplyResult, error)
	Ask(ctx context.Context, worker, content string, timeout time.Duration) (messaging.AskResult, error)
	PollPage(ctx context.Context, recipient string, req messaging.PollRequest) (messaging.PollPage, error)
	Ack(recipient string, ids []string) (int, error)
	Pending(recipient string) int
	Status(name string) messaging.WorkerStatus
}

// PrimaryName is the primary's name in the messaging core (its mailbox and
// the From of its messages). It is not a valid member name, so no worker can
// share the primary's mailbox; tools show it as "primary".
const PrimaryName = "@primary"

// Tool names, exactly as DESIGN §5.2 spells them.
const (
	toolSend     = "bridge_send"
	toolReply    = "bridge_reply"
	toolAsk      = "bridge_ask"
	toolPoll     = "bridge_poll"
	toolAck      = "bridge_ack"
	toolStatus   = "bridge_status"
	toolSpawn    = "bridge_spawn"
	toolList     = "bridge_list"
	toolStop     = "bridge_stop"
	toolProfiles = "bridge_profiles"
	toolWhoami   = "bridge_whoami"
)

var toolNames = []string{toolSend, toolReply, toolAsk, toolPoll, toolAck, toolStatus, toolSpawn, toolList, toolStop, toolProfiles, toolWhoami}

// --- inputs and outputs ---

// SendInput is bridge_send's arguments.
type SendInput struct {
	Content   string `json:"content" jsonschema:"the message for the worker, typed into its agent as a prompt (or, with turnId, the answer to its question)"`
	SessionID string `json:"sessionId,omitempty" jsonschema:"which worker: member name, session UUID, terminal id or pane id; may be left out when exactly one worker exists"`
	TimeoutMs int64  `json:"timeoutMs,omitempty" jsonschema:"how long to wait for the outcome, in milliseconds (default 600000); on timeout the turn stays open and its reply lands in your mailbox (bridge_poll)"`
	Wait      bool   `json:"wait,omitempty" jsonschema:"true (default): hold this call until the worker replies, asks a question, ends its turn or the timeout passes; false: return at once with outcome dispatched"`
	TurnID    string `json:"turnId,omitempty" jsonschema:"continue this turn: answers the worker's pending question (from an earlier outcome question) instead of starting a new task"`
	Profile   string `json:"profile,omitempty" jsonschema:"when no worker matches sessionId (or none exists), spawn one with this Profile first"`
}

// SendOutput is bridge_send's result.
type SendOutput struct {
	Outcome    string `json:"outcome" jsonschema:"reply, question, turn_done, timeout or dispatched"`
	Text       string `json:"text,omitempty" jsonschema:"the reply, the worker's question, or (turn_done) the tail of its terminal"`
	TurnID     string `json:"turnId" jsonschema:"the turn this exchange belongs to; pass it back as turnId to answer a question"`
	SessionID  string `json:"sessionId,omitempty" jsonschema:"the worker's session UUID"`
	Name       string `json:"name,omitempty" jsonschema:"the worker's member name"`
	DispatchID string `json:"dispatchId,omitempty" jsonschema:"id of the queued message (wait false); left out for a member on another node, whose node queues it"`
}

// ReplyInput is bridge_reply's arguments.
type ReplyInput struct {
	Content string `json:"content" jsonschema:"your answer to the task you were given"`
	Final   bool   `json:"final,omitempty" jsonschema:"true (default): this ends your turn; false: a progress note, the turn stays open"`
}

// ReplyOutput is bridge_reply's result.
type ReplyOutput struct {
	Delivered bool   `json:"delivered" jsonschema:"always true when no error"`
	Mode      string `json:"mode" jsonschema:"resolved (handed to the waiting caller), queued (stored in its mailbox) or injected (stored and typed into its pane)"`
	TurnID    string `json:"turnId,omitempty" jsonschema:"the turn the reply belonged to"`
}

// AskInput is bridge_ask's arguments.
type AskInput struct {
	Content   string `json:"content" jsonschema:"your question for whoever gave you the task"`
	TimeoutMs int64  `json:"timeoutMs,omitempty" jsonschema:"how long to wait for the answer, in milliseconds (default 600000)"`
}

// AskOutput is bridge_ask's result.
type AskOutput struct {
	Outcome string `json:"outcome" jsonschema:"answer or timeout"`
	Answer  string `json:"answer,omitempty" jsonschema:"the answer"`
	TurnID  string `json:"turnId,omitempty" jsonschema:"the turn of the question"`
}

// PollInput is bridge_poll's arguments.
type PollInput struct {
	Wait      bool   `json:"wait,omitempty" jsonschema:"true: when no message follows the cursor, wait for one (up to timeoutMs); false (default): return at once"`
	TimeoutMs int64  `json:"timeoutMs,omitempty" jsonschema:"with wait, how long to wait in milliseconds (default 600000); an empty list when it passes"`
	Limit     int    `json:"limit,omitempty" jsonschema:"at most this many messages (1 to 1000, default 100); a page also stops at 1 MiB of content"`
	Cursor    string `json:"cursor,omitempty" jsonschema:"nextCursor of your previous poll: continue after its last message; leave out to start from your oldest unacknowledged message"`
}

// MessageView is one mailbox message.
type MessageView struct {
	ID        string `json:"id" jsonschema:"message id; pass it to bridge_ack once handled"`
	From      string `json:"from" jsonschema:"who sent it: primary or a member name"`
	Kind      string `json:"kind" jsonschema:"reply, progress, question, answer, turn_done, worker_gone or delivery_failed"`
	Content   string `json:"content" jsonschema:"the text"`
	TurnID    string `json:"turnId,omitempty" jsonschema:"the turn it belongs to"`
	CreatedAt string `json:"createdAt" jsonschema:"RFC 3339 time it arrived"`
}

// PollOutput is bridge_poll's result.
type PollOutput struct {
	Messages   []MessageView `json:"messages" jsonschema:"unacknowledged messages addressed to you, oldest first; a poll without a cursor returns them again until acknowledged"`
	NextCursor string        `json:"nextCursor,omitempty" jsonschema:"pass as cursor to read on (or, with wait, to wait for what arrives after this page)"`
	More       int           `json:"more" jsonschema:"unacknowledged messages after this page"`
}

// AckInput is bridge_ack's arguments.
type AckInput struct {
	IDs []string `json:"ids" jsonschema:"ids of messages from bridge_poll that you have handled"`
}

// AckOutput is bridge_ack's result.
type AckOutput struct {
	Acked int `json:"acked" jsonschema:"how many messages were retired; unknown or already acknowledged ids count zero"`
}

// StatusInput is bridge_status's arguments.
type StatusInput struct {
	SessionID string `json:"sessionId,omitempty" jsonschema:"one worker (member name, session UUID, terminal id or pane id); all workers when left out. A worker may only ask about itself"`
}

// TurnView is one open turn.
type TurnView struct {
	TurnID    string `json:"turnId"`
	CreatedAt string `json:"createdAt"`
	Deadline  string `json:"deadline" jsonschema:"absolute deadline of the waiting call; survives restarts"`
	Delivered bool   `json:"delivered" jsonschema:"its prompt reached (or may have reached) the worker"`
	Waiting   bool   `json:"waiting" jsonschema:"a caller holds a call on it"`
	Asking    bool   `json:"asking" jsonschema:"the worker waits for an answer"`
	Question  string `json:"question,omitempty"`
}

// DeliveryView is one delivery into a pane.
type DeliveryView struct {
	MessageID string `json:"messageId"`
	TurnID    string `json:"turnId,omitempty"`
	At        string `json:"at"`
	Result    string `json:"result" jsonschema:"delivered, uncertain (outcome unknown; never re-sent) or failed"`
	Reason    string `json:"reason,omitempty"`
}

// WorkerStatusView is bridge_status's view of one worker.
type WorkerStatusView struct {
	MemberView
	QueueDepth   int            `json:"queueDepth" jsonschema:"messages waiting to be typed into its pane"`
	Delivering   string         `json:"delivering,omitempty" jsonschema:"id of the message being typed or awaiting pickup"`
	CurrentTurn  string         `json:"currentTurn,omitempty"`
	OpenTurns    []TurnView     `json:"openTurns"`
	LastDelivery *DeliveryView  `json:"lastDelivery,omitempty"`
	Uncertain    []DeliveryView `json:"uncertain,omitempty" jsonschema:"deliveries whose outcome is unknown"`
	Gone         string         `json:"gone,omitempty" jsonschema:"why the worker is gone, if it is"`
}

// StatusOutput is bridge_status's result.
type StatusOutput struct {
	Caller  string             `json:"caller" jsonschema:"primary or your member name"`
	Pending int                `json:"pending" jsonschema:"unacknowledged messages in your own mailbox (bridge_poll)"`
	Workers []WorkerStatusView `json:"workers"`
}

// SpawnInput is bridge_spawn's arguments. The handler reads the raw
// arguments (the subscription guard must see every key as sent); this type
// documents them.
type SpawnInput struct {
	Profile   string              `json:"profile" jsonschema:"name of an operator Profile (bridge_profiles lists them)"`
	Name      string              `json:"name,omitempty" jsonschema:"member name, lower case letters, digits, - and _ (max 32); generated from the profile when left out"`
	MCPTarget *v1alpha1.MCPTarget `json:"mcpTarget,omitempty" jsonschema:"which gateway the worker talks to: {kind: resident} (default) or {kind: tenant, tenantId: NAME}"`
	Transport string              `json:"transport,omitempty" jsonschema:"stdio or streamable-http (default)"`
	Workspace string              `json:"workspace,omitempty" jsonschema:"herdr workspace label for its tab (default fleetd)"`
	Prompt    string              `json:"prompt,omitempty" jsonschema:"first task, delivered once when it is first Ready"`
	Wait      bool                `json:"wait,omitempty" jsonschema:"true (default): return once it is Ready (or failed, or the timeout passed)"`
	TimeoutMs int64               `json:"timeoutMs,omitempty" jsonschema:"how long to wait for Ready, in milliseconds (default 120000)"`
}

// SpawnOutput is bridge_spawn's result.
type SpawnOutput struct {
	MemberView
	Result string `json:"result" jsonschema:"created, configured (an existing member's spec changed) or unchanged"`
}

// ListOutput is bridge_list's result.
type ListOutput struct {
	Members []MemberView `json:"members"`
}

// StopInput is bridge_stop's arguments.
type StopInput struct {
	PaneID    string `json:"paneId" jsonschema:"the worker to stop: pane id, member name, session UUID or terminal id"`
	Wait      bool   `json:"wait,omitempty" jsonschema:"true (default): return once its pane is closed (or the timeout passed)"`
	TimeoutMs int64  `json:"timeoutMs,omitempty" jsonschema:"how long to wait, in milliseconds (default 30000)"`
	Force     bool   `json:"force,omitempty" jsonschema:"true: close its pane now even if its agent is in the middle of a turn (its work is lost and calls waiting on it end with worker_gone); also forces a worker stopped before whose pane is still closing"`
}

// StopOutput is bridge_stop's result.
type StopOutput struct {
	Stopped bool `json:"stopped" jsonschema:"always true: the member is gone (stopping twice is fine)"`
	Existed bool `json:"existed" jsonschema:"false when no such member existed"`
	// Terminating: the member's pane was still open when the call
	// returned.
	Terminating bool `json:"terminating,omitempty" jsonschema:"true when its pane is still open: its agent finishes what it was given (a reply to a waiting bridge_send still arrives) and the pane closes once it is idle, at the latest at the end of its grace period; force: true closes it now"`
}

// ProfileView is one Profile as models may see it: never its env or args.
type ProfileView struct {
	Name        string `json:"name"`
	Harness     string `json:"harness" jsonschema:"agent kind: claude, codex, gemini, …"`
	Description string `json:"description,omitempty"`
}

// ProfilesOutput is bridge_profiles's result.
type ProfilesOutput struct {
	Profiles []ProfileView `json:"profiles"`
}

// WhoamiOutput is bridge_whoami's result.
type WhoamiOutput struct {
	Role      string `json:"role" jsonschema:"primary or worker"`
	Name      string `json:"name,omitempty" jsonschema:"your member name (workers)"`
	SessionID string `json:"sessionId,omitempty"`
	PaneID    string `json:"paneId,omitempty"`
}

// --- registration ---

func ptr[T any](v T) *T { return &v }

// schemaFor infers T's JSON schema, sets defaults the SDK applies to
// missing arguments and bounds timeoutMs.
func schemaFor[T any](defaults map[string]any) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("schema of %T: %v", *new(T), err))
	}
	for k, v := range defaults {
		b, _ := json.Marshal(v)
		s.Properties[k].Default = b
	}
	return boundTimeout(s)
}

// permissive drops additionalProperties: false everywhere, so that a spawn
// naming a forbidden field reaches the guard and gets its real error.
func permissive(s *jsonschema.Schema) *jsonschema.Schema {
	s.AdditionalProperties = nil
	for _, p := range s.Properties {
		permissive(p)
	}
	return s
}

// tools implements the bridge_* tools.
type tools struct {
	msg     Messenger
	mailbox *Mailbox
	members *members
}

func (s *restServer) newMCPServer() *sdk.Server {
	t := &tools{msg: s.opts.Messages, mailbox: s.mailbox, members: s.members}
	srv := sdk.NewServer(&sdk.Implementation{Name: "fleetd", Title: "fleetd gateway", Version: cmp.Or(s.opts.Version, "dev")},
		&sdk.ServerOptions{Instructions: instructions})
	srv.AddReceivingMiddleware(s.toolMiddleware, s.rateLimit, s.holdLimit)

	sdk.AddTool(srv, &sdk.Tool{Name: toolSend,
		Description: "Primary only. Give a worker a task (typed into its agent when it is idle) and, by default, wait for the outcome: " +
			"reply (the worker called bridge_reply), question (it called bridge_ask: answer with bridge_send content=ANSWER turnId=TURN), " +
			"turn_done (its turn ended without a reply; text is the tail of its terminal) or timeout (the turn stays open; the reply will be in bridge_poll). " +
			"With wait false it returns dispatched at once and the reply lands in your mailbox.",
		InputSchema: schemaFor[SendInput](map[string]any{"wait": true, "timeoutMs": 600000}),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}}, t.send)
	sdk.AddTool(srv, &sdk.Tool{Name: toolReply,
		Description: "Worker only. Answer the task you were given; by default this ends your turn and hands the answer to whoever is waiting (or their mailbox). final false sends a progress note.",
		InputSchema: schemaFor[ReplyInput](map[string]any{"final": true}),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}}, t.reply)
	sdk.AddTool(srv, &sdk.Tool{Name: toolAsk,
		Description: "Worker only. Ask whoever gave you the task a question and wait for the answer (returned here, never typed into your terminal).",
		InputSchema: schemaFor[AskInput](nil),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}}, t.ask)
	sdk.AddTool(srv, &sdk.Tool{Name: toolPoll,
		Description: "Read the unacknowledged messages addressed to you (replies to detached or timed-out sends, questions, progress), oldest first, a page at a time: " +
			"pass the nextCursor you got as cursor to read on; more says how many follow. Messages stay until you bridge_ack them (a poll without a cursor returns them again).",
		InputSchema: schemaFor[PollInput](map[string]any{"wait": false, "limit": messaging.DefaultPollLimit}),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}}, t.poll)
	sdk.AddTool(srv, &sdk.Tool{Name: toolAck,
		Description: "Retire messages you got from bridge_poll; they are never returned again.",
		InputSchema: schemaFor[AckInput](nil),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)}}, t.ack)
	sdk.AddTool(srv, &sdk.Tool{Name: toolStatus,
		Description: "Delivery state per worker: agent status, phase, queued messages, open turns, the last delivery and deliveries whose outcome is uncertain; plus your own pending message count.",
		InputSchema: schemaFor[StatusInput](nil),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}}, t.status)
	sdk.AddTool(srv, &sdk.Tool{Name: toolSpawn,
		Description: "Primary only. Start a worker from an operator Profile (a manifest is written to the watched directory) and, by default, wait until it is Ready. " +
			"A worker never carries environment, URLs, credentials or commands: those live in Profiles and Tenants, and such a request is refused (subscription_boundary or invalid_spec).",
		InputSchema: permissive(schemaFor[SpawnInput](map[string]any{"wait": true, "timeoutMs": int64(DefaultSpawnTimeout / time.Millisecond)})),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)}}, t.spawn)
	sdk.AddTool(srv, &sdk.Tool{Name: toolList,
		Description: "All members with their phase, agent status and ids (name, sessionId, paneId, terminalId).",
		InputSchema: schemaFor[struct{}](nil),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}}, t.list)
	sdk.AddTool(srv, &sdk.Tool{Name: toolStop,
		Description: "Primary only. Stop a worker for good: its manifest is removed and it takes no new message; a worker in the middle of a turn finishes it first (its reply still reaches a waiting bridge_send), then its pane closes — at the latest at the end of its grace period (10 minutes unless its profile says otherwise); force: true closes it at once, and calls waiting on it end with worker_gone. Stopping an unknown or already stopped worker succeeds.",
		InputSchema: schemaFor[StopInput](map[string]any{"wait": true, "timeoutMs": int64(DefaultStopTimeout / time.Millisecond)}),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)}}, t.stop)
	sdk.AddTool(srv, &sdk.Tool{Name: toolProfiles,
		Description: "The Profiles workers can be spawned from: name, harness and description.",
		InputSchema: schemaFor[struct{}](nil),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}}, t.profiles)
	sdk.AddTool(srv, &sdk.Tool{Name: toolWhoami,
		Description: "Who fleetd thinks you are: the primary, or a worker with its name and ids. Decided by your token, never by arguments.",
		InputSchema: schemaFor[struct{}](nil),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}}, t.whoami)
	return srv
}

const instructions = `fleetd runs a fleet of coding agents. The primary gives workers tasks with bridge_send and gets their answers back in the same call; workers answer with bridge_reply and ask questions with bridge_ask. Who you are comes from your token (bridge_whoami).`

// --- handlers ---

func primaryOnly(req *sdk.CallToolRequest, tool string) (tokens.Identity, error) {
	id, err := callerOf(req)
	if err != nil {
		return id, err
	}
	if !isPrimary(id) {
		return id, toolErr(codeForbidden, "%s is for the primary only; workers answer with bridge_reply or bridge_ask", tool)
	}
	return id, nil
}

func workerOnly(req *sdk.CallToolRequest, tool string) (tokens.Identity, error) {
	id, err := callerOf(req)
	if err != nil {
		return id, err
	}
	if isPrimary(id) {
		return id, toolErr(codeForbidden, "%s is for workers only; the primary talks to workers with bridge_send", tool)
	}
	return id, nil
}

// mailboxOf is the caller's name in the messaging core.
func mailboxOf(id tokens.Identity) string {
	if isPrimary(id) {
		return PrimaryName
	}
	return id.Member
}

func shownName(name string) string {
	if name == PrimaryName {
		return tokens.RolePrimary
	}
	return name
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func (t *tools) send(ctx context.Context, req *sdk.CallToolRequest, in SendInput) (*sdk.CallToolResult, SendOutput, error) {
	if _, err := primaryOnly(req, toolSend); err != nil {
		return nil, SendOutput{}, err
	}
	timeout, err := timeoutArg(in.TimeoutMs)
	if err != nil {
		return nil, SendOutput{}, err
	}
	sr := messaging.SendRequest{From: PrimaryName, Content: in.Content, TurnID: in.TurnID, Wait: in.Wait, Timeout: timeout}
	if in.TurnID == "" || in.SessionID != "" {
		m, err := t.members.resolveWorker(in.SessionID)
		if err != nil && in.Profile != "" && in.TurnID == "" {
			m, err = t.autoSpawn(ctx, in)
		}
		if err != nil {
			return nil, SendOutput{}, err
		}
		sr.To = m.Name
	}
	res, err := t.msg.Send(ctx, sr)
	if err != nil {
		return nil, SendOutput{}, fromCore(err)
	}
	out := SendOutput{Outcome: string(res.Outcome), Text: res.Text, TurnID: res.TurnID, Name: res.Worker, DispatchID: res.DispatchID}
	if m, ok := t.members.source.Member(res.Worker); ok {
		out.SessionID = m.Status.SessionID
	}
	return nil, out, nil
}

// autoSpawn starts a worker for bridge_send's profile argument.
func (t *tools) autoSpawn(ctx context.Context, in SendInput) (v1alpha1.Member, error) {
	args := map[string]any{"profile": in.Profile}
	if v1alpha1.IsMemberName(in.SessionID) {
		args["name"] = in.SessionID
	}
	data, err := json.Marshal(args)
	if err != nil {
		return v1alpha1.Member{}, toolErr(codeInternal, "encode spawn arguments: %v", err)
	}
	sr, err := decodeSpawnArgs(data)
	if err != nil {
		return v1alpha1.Member{}, err
	}
	view, _, err := t.members.apply(ctx, sr)
	if err != nil {
		return v1alpha1.Member{}, err
	}
	if view.Phase != v1alpha1.PhaseReady {
		return v1alpha1.Member{}, toolErr(codeUnavailable, "spawned %s but it is %s, not Ready: %s", view.Name, view.Phase, view.LastError)
	}
	m, _ := t.members.source.Member(view.Name)
	return m, nil
}

func (t *tools) reply(ctx context.Context, req *sdk.CallToolRequest, in ReplyInput) (*sdk.CallToolResult, ReplyOutput, error) {
	id, err := workerOnly(req, toolReply)
	if err != nil {
		return nil, ReplyOutput{}, err
	}
	res, err := t.msg.Reply(ctx, id.Member, in.Content, in.Final)
	if err != nil {
		return nil, ReplyOutput{}, fromCore(err)
	}
	return nil, ReplyOutput{Delivered: true, Mode: string(res.Mode), TurnID: res.TurnID}, nil
}

func (t *tools) ask(ctx context.Context, req *sdk.CallToolRequest, in AskInput) (*sdk.CallToolResult, AskOutput, error) {
	id, err := workerOnly(req, toolAsk)
	if err != nil {
		return nil, AskOutput{}, err
	}
	timeout, err := timeoutArg(in.TimeoutMs)
	if err != nil {
		return nil, AskOutput{}, err
	}
	res, err := t.msg.Ask(ctx, id.Member, in.Content, timeout)
	if err != nil {
		return nil, AskOutput{}, fromCore(err)
	}
	return nil, AskOutput{Outcome: string(res.Outcome), Answer: res.Answer, TurnID: res.TurnID}, nil
}

func (t *tools) poll(ctx context.Context, req *sdk.CallToolRequest, in PollInput) (*sdk.CallToolResult, PollOutput, error) {
	id, err := callerOf(req)
	if err != nil {
		return nil, PollOutput{}, err
	}
	out, err := t.mailbox.Poll(ctx, id, in)
	if err != nil {
		return nil, PollOutput{}, err
	}
	ids := make([]string, len(out.Messages))
	for i, m := range out.Messages {
		ids[i] = m.ID
	}
	// The messages travel once, in the structured result; the text block
	// only summarises the page (a copy of every content there would double
	// the response).
	summary := fmt.Sprintf("%d messages", len(ids))
	if len(ids) > 0 {
		summary += " (" + strings.Join(ids, ", ") + ") in the structured result; bridge_ack their ids once handled"
	}
	if out.More > 0 {
		summary += fmt.Sprintf("; %d more: poll again with cursor %s", out.More, out.NextCursor)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: summary}}}, out, nil
}

// maxPollLimit bounds bridge_poll's limit argument.
const maxPollLimit = 1000

func (t *tools) ack(_ context.Context, req *sdk.CallToolRequest, in AckInput) (*sdk.CallToolResult, AckOutput, error) {
	id, err := callerOf(req)
	if err != nil {
		return nil, AckOutput{}, err
	}
	out, err := t.mailbox.Ack(id, in.IDs)
	return nil, out, err
}

func (t *tools) status(_ context.Context, req *sdk.CallToolRequest, in StatusInput) (*sdk.CallToolResult, StatusOutput, error) {
	id, err := callerOf(req)
	if err != nil {
		return nil, StatusOutput{}, err
	}
	out := StatusOutput{Caller: shownName(mailboxOf(id)), Pending: t.msg.Pending(mailboxOf(id)), Workers: []WorkerStatusView{}}
	var list []v1alpha1.Member
	switch {
	case in.SessionID != "":
		m, ok := t.members.resolve(in.SessionID)
		if !ok {
			return nil, StatusOutput{}, toolErr(codeNotFound, "no member with name, sessionId, terminal id or pane id %q", in.SessionID)
		}
		if !isPrimary(id) && m.Name != id.Member {
			return nil, StatusOutput{}, toolErr(codeForbidden, "a worker may only ask about itself; leave sessionId out")
		}
		list = []v1alpha1.Member{m}
	case isPrimary(id):
		list = t.members.source.Members()
	default:
		m, ok := t.members.source.Member(id.Member)
		if !ok {
			return nil, StatusOutput{}, toolErr(codeNotFound, "your member %s no longer exists", id.Member)
		}
		list = []v1alpha1.Member{m}
	}
	for _, m := range list {
		out.Workers = append(out.Workers, workerStatus(m, t.msg.Status(m.Name)))
	}
	return nil, out, nil
}

func workerStatus(m v1alpha1.Member, s messaging.WorkerStatus) WorkerStatusView {
	v := WorkerStatusView{MemberView: viewOf(m), QueueDepth: s.QueueDepth, Delivering: s.Delivering,
		CurrentTurn: s.CurrentTurn, OpenTurns: []TurnView{}}
	if v.AgentStatus == "" {
		v.AgentStatus = s.AgentStatus
	}
	if s.Gone {
		v.Gone = cmp.Or(s.GoneReason, "gone")
	}
	for _, t := range s.OpenTurns {
		v.OpenTurns = append(v.OpenTurns, TurnView{TurnID: t.ID, CreatedAt: rfc3339(t.CreatedAt), Deadline: rfc3339(t.Deadline),
			Delivered: t.Delivered, Waiting: t.Waiting, Asking: t.Asking, Question: t.Question})
	}
	dv := func(d messaging.Delivery) DeliveryView {
		return DeliveryView{MessageID: d.MessageID, TurnID: d.TurnID, At: rfc3339(d.At), Result: string(d.Result), Reason: d.Reason}
	}
	if s.LastDelivery != nil {
		v.LastDelivery = ptr(dv(*s.LastDelivery))
	}
	for _, d := range s.Uncertain {
		v.Uncertain = append(v.Uncertain, dv(d))
	}
	return v
}

func (t *tools) spawn(ctx context.Context, req *sdk.CallToolRequest, _ SpawnInput) (*sdk.CallToolResult, SpawnOutput, error) {
	if _, err := primaryOnly(req, toolSpawn); err != nil {
		return nil, SpawnOutput{}, err
	}
	// The raw arguments, as the client sent them: the guard must see every
	// key, a duplicate too, not a decoded copy.
	sr, err := decodeSpawnArgs(req.Params.Arguments)
	if err != nil {
		return nil, SpawnOutput{}, err
	}
	view, result, err := t.members.apply(ctx, sr)
	if err != nil {
		return nil, SpawnOutput{}, err
	}
	return nil, SpawnOutput{MemberView: view, Result: result}, nil
}

func (t *tools) list(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, ListOutput, error) {
	if _, err := callerOf(req); err != nil {
		return nil, ListOutput{}, err
	}
	out := ListOutput{Members: []MemberView{}}
	for _, m := range t.members.source.Members() {
		out.Members = append(out.Members, viewOf(m))
	}
	return nil, out, nil
}

func (t *tools) stop(ctx context.Context, req *sdk.CallToolRequest, in StopInput) (*sdk.CallToolResult, StopOutput, error) {
	if _, err := primaryOnly(req, toolStop); err != nil {
		return nil, StopOutput{}, err
	}
	if in.PaneID == "" {
		return nil, StopOutput{}, toolErr(codeInvalidArgument, "paneId is empty; pass a pane id or member name from bridge_list")
	}
	timeout, err := timeoutArg(in.TimeoutMs)
	if err != nil {
		return nil, StopOutput{}, err
	}
	did, err := t.members.stop(ctx, in.PaneID, in.Wait, in.Force, timeout)
	if err != nil {
		return nil, StopOutput{}, err
	}
	return nil, StopOutput{Stopped: true, Existed: did.existed, Terminating: did.closing}, nil
}

func (t *tools) profiles(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, ProfilesOutput, error) {
	if _, err := callerOf(req); err != nil {
		return nil, ProfilesOutput{}, err
	}
	out := ProfilesOutput{Profiles: []ProfileView{}}
	if st := t.members.store; st != nil {
		for _, obj := range st.List(v1alpha1.KindProfile) {
			if p, ok := obj.(*v1alpha1.Profile); ok {
				out.Profiles = append(out.Profiles, ProfileView{Name: p.Name, Harness: p.Spec.Harness, Description: p.Spec.Description})
			}
		}
	}
	sort.Slice(out.Profiles, func(i, j int) bool { return out.Profiles[i].Name < out.Profiles[j].Name })
	return nil, out, nil
}

func (t *tools) whoami(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, WhoamiOutput, error) {
	id, err := callerOf(req)
	if err != nil {
		return nil, WhoamiOutput{}, err
	}
	if isPrimary(id) {
		return nil, WhoamiOutput{Role: tokens.RolePrimary}, nil
	}
	out := WhoamiOutput{Role: tokens.RoleWorker, Name: id.Member, PaneID: id.PaneID}
	if m, ok := t.members.source.Member(id.Member); ok {
		out.SessionID = m.Status.SessionID
		out.PaneID = cmp.Or(out.PaneID, m.Status.PaneID)
	}
	return nil, out, nil
}
