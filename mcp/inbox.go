package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// Mailbox is a caller's mailbox: the messages addressed to it that it has
// not acknowledged (replies to detached or timed-out sends, questions,
// progress notes, worker_gone and delivery_failed notices). bridge_poll and
// bridge_ack, GET /inbox and POST /inbox/ack are this one code path; a
// caller in another package (the console) builds one with [NewMailbox] on
// the same messaging core and passes the identity it has authenticated.
// Its errors are *[ToolError]s.
type Mailbox struct{ msg Messenger }

// NewMailbox returns the mailboxes of the messaging core msg.
func NewMailbox(msg Messenger) *Mailbox { return &Mailbox{msg: msg} }

// Poll returns a page of id's unacknowledged messages, oldest first, as
// bridge_poll does: in.Cursor continues after an earlier page; with
// in.Wait, an empty mailbox is waited on until a message arrives,
// in.TimeoutMs passes (an empty page) or ctx ends. in.Limit is 1 to 1000
// (0: 100); a page also stops at the core's byte bound.
func (b *Mailbox) Poll(ctx context.Context, id tokens.Identity, in PollInput) (PollOutput, error) {
	timeout, err := timeoutArg(in.TimeoutMs)
	if err != nil {
		return PollOutput{}, err
	}
	if in.Limit < 0 || in.Limit > maxPollLimit {
		return PollOutput{}, toolErr(codeInvalidArgument, "limit: %d is out of range; want 1 to %d (default %d)", in.Limit, maxPollLimit, messaging.DefaultPollLimit)
	}
	page, err := b.msg.PollPage(ctx, mailboxOf(id), messaging.PollRequest{Cursor: in.Cursor, Limit: in.Limit, Wait: in.Wait, Timeout: timeout})
	if err != nil {
		return PollOutput{}, fromCore(err)
	}
	out := PollOutput{Messages: make([]MessageView, len(page.Messages)), NextCursor: page.Next, More: page.More}
	for i, m := range page.Messages {
		out.Messages[i] = MessageView{ID: m.ID, From: shownName(m.From), Kind: string(m.Kind), Content: m.Content,
			TurnID: m.TurnID, CreatedAt: rfc3339(m.CreatedAt)}
	}
	return out, nil
}

// Ack retires messages of id's mailbox by id; unknown or already
// acknowledged ids count zero.
func (b *Mailbox) Ack(id tokens.Identity, ids []string) (AckOutput, error) {
	if len(ids) == 0 {
		return AckOutput{}, toolErr(codeInvalidArgument, "ids is empty; pass the ids bridge_poll returned")
	}
	n, err := b.msg.Ack(mailboxOf(id), ids)
	if err != nil {
		return AckOutput{}, fromCore(err)
	}
	return AckOutput{Acked: n}, nil
}

// getInbox is GET /inbox: bridge_poll for the caller's own mailbox. Query:
// wait=true, timeoutMs, limit, cursor, as the tool's arguments.
func (s *restServer) getInbox(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
	q := r.URL.Query()
	var in PollInput
	switch v := q.Get("wait"); v {
	case "", "false":
	case "true":
		in.Wait = true
	default:
		writeToolError(w, toolErr(codeInvalidArgument, "wait: %s; want true or false", quote(v)))
		return
	}
	var err error
	if in.TimeoutMs, err = intParam(q.Get("timeoutMs"), "timeoutMs"); err != nil {
		writeToolError(w, err)
		return
	}
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		writeToolError(w, err)
		return
	}
	if limit < 0 || limit > maxPollLimit {
		writeToolError(w, toolErr(codeInvalidArgument, "limit: %d is out of range; want 1 to %d (default %d)", limit, maxPollLimit, messaging.DefaultPollLimit))
		return
	}
	in.Limit = int(limit)
	in.Cursor = q.Get("cursor")
	if in.Wait {
		release, te := s.hold(id)
		if te != nil {
			writeToolError(w, te)
			return
		}
		defer release()
	}
	out, err := s.mailbox.Poll(r.Context(), id, in)
	if err != nil {
		writeToolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// ackInbox is POST /inbox/ack: bridge_ack for the caller's own mailbox.
// Body: {"ids": [...]}.
func (s *restServer) ackInbox(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody()))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge,
				"request body is larger than "+strconv.FormatInt(mbe.Limit, 10)+" bytes")
			return
		}
		writeToolError(w, toolErr(codeInvalidArgument, "read request body: %v", err))
		return
	}
	var in AckInput
	if err := decodeStrictJSON(body, &in); err != nil {
		writeToolError(w, toolErr(codeInvalidArgument, "body: %v; want {\"ids\": [\"...\"]}", err))
		return
	}
	out, err := s.mailbox.Ack(id, in.IDs)
	if err != nil {
		writeToolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// decodeStrictJSON decodes one JSON value into v, refusing unknown fields
// and anything after the value.
func decodeStrictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
