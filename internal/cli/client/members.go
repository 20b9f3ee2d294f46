package client

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// memberPath is the REST path of member ref, with what follows it.
func memberPath(ref, rest string) string { return "/members/" + url.PathEscape(ref) + rest }

// Member finds the member ref names — its name, pane id, terminal id or
// session id — the way every fleetd command accepts one: the running
// fleetd resolves it (GET /members/{ref}, the resolver DELETE and the
// bridge tools use). A reference that names no member is a
// [*NoMemberError].
func (c *Client) Member(ctx context.Context, ref string) (v1alpha1.Member, error) {
	var m v1alpha1.Member
	err := c.Get(ctx, memberPath(ref, ""), &m)
	if IsNotFound(err) {
		return m, &NoMemberError{Ref: ref}
	}
	return m, err
}

// NoMemberError is a reference that names no member of the fleetd asked.
type NoMemberError struct{ Ref string }

func (e *NoMemberError) Error() string {
	return fmt.Sprintf("no member with name, pane id, terminal id or session id %s", termtext.Line(fmt.Sprintf("%q", e.Ref)))
}

// LiveMember reads member name; found is false when fleetd has none by
// that name.
func (c *Client) LiveMember(ctx context.Context, name string) (m *v1alpha1.Member, found bool, err error) {
	m = &v1alpha1.Member{}
	if err := c.Get(ctx, memberPath(name, ""), m); err != nil {
		if IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return m, true, nil
}

// MemberEvents reads member name's recent events.
func (c *Client) MemberEvents(ctx context.Context, name string) ([]v1alpha1.Event, error) {
	var events []v1alpha1.Event
	err := c.Get(ctx, memberPath(name, "/events"), &events)
	return events, err
}

// DeleteMember deletes member ref (DELETE /members/{ref}) and returns the
// member as it was when it was deleted (no name when fleetd did not say).
// A member whose agent is busy keeps its tab until the agent is idle; now
// closes it at once (?now=true), a member deleted before and still
// closing too.
func (c *Client) DeleteMember(ctx context.Context, ref string, now bool) (mcp.MemberView, error) {
	var res mcp.WriteResult
	path := memberPath(ref, "")
	if now {
		path += "?now=true"
	}
	err := c.Delete(ctx, path, &res)
	return res.Member, err
}

// Inbox reads up to limit messages of the caller's mailbox (GET /inbox),
// oldest first. With wait above zero, an empty mailbox is waited on for
// that long.
func (c *Client) Inbox(ctx context.Context, limit int, wait time.Duration) (mcp.PollOutput, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	held := c
	if wait > 0 {
		q.Set("wait", "true")
		q.Set("timeoutMs", strconv.FormatInt(wait.Milliseconds(), 10))
		held = c.WithTimeout(wait + heldCallMargin) // the poll is held up to wait
	}
	var page mcp.PollOutput
	err := held.Get(ctx, "/inbox?"+q.Encode(), &page)
	return page, err
}

// Ack acknowledges the caller's messages ids (POST /inbox/ack): they are
// not read again.
func (c *Client) Ack(ctx context.Context, ids []string) error {
	var res mcp.AckOutput
	_, err := c.Post(ctx, "/inbox/ack", mcp.AckInput{IDs: ids}, &res)
	return err
}

// Logs reads the last lines (0: all) of member ref's screen (GET
// /members/{ref}/logs).
func (c *Client) Logs(ctx context.Context, ref string, lines int) (mcp.LogsOutput, error) {
	var res mcp.LogsOutput
	err := c.Get(ctx, logsPath(ref, lines), &res)
	return res, err
}

func logsPath(ref string, lines int) string {
	return memberPath(ref, "/logs?lines="+strconv.Itoa(lines))
}

// ManifestErrors reads the problems of the manifests fleetd watches (GET
// /manifests/errors): what `fleetd validate` would print of them, each
// with the object its document declares.
func (c *Client) ManifestErrors(ctx context.Context) (mcp.ManifestErrorList, error) {
	var list mcp.ManifestErrorList
	err := c.Get(ctx, "/manifests/errors", &list)
	return list, err
}

// PruneHold reads the members whose prune fleetd holds (GET /prune).
func (c *Client) PruneHold(ctx context.Context) (mcp.PruneHoldList, error) {
	var list mcp.PruneHoldList
	err := c.Get(ctx, "/prune", &list)
	return list, err
}

// ConfirmPrune confirms the held prune (POST /prune/confirm): fleetd
// prunes the held members now and names them.
func (c *Client) ConfirmPrune(ctx context.Context) ([]string, error) {
	var res mcp.PruneConfirmed
	_, err := c.Post(ctx, "/prune/confirm", struct{}{}, &res)
	return res.Pruned, err
}
