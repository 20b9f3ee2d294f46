package mcp

import "github.com/fleetd-dev/fleetd/api/v1alpha1"

// A member reference is how every command and tool names a member: its
// name, its session UUID (status.sessionId), its herdr terminal id or its
// pane id. One function resolves them all, so that bridge_send, bridge_stop,
// GET and DELETE /members/{ref} — and through them fleetd get, describe,
// send, delete and logs — accept the same references the same way.

// ResolveMember finds the member a reference names in source: a member
// name first (names are unique and are what a user types most), then the
// first member, in name order, whose session id, terminal id or pane id
// equals ref. An empty reference names nothing.
func ResolveMember(source MemberSource, ref string) (v1alpha1.Member, bool) {
	if ref == "" {
		return v1alpha1.Member{}, false
	}
	if m, ok := source.Member(ref); ok {
		return m, true
	}
	for _, m := range source.Members() {
		if s := m.Status; ref == s.SessionID || ref == s.TerminalID || ref == s.PaneID {
			return m, true
		}
	}
	return v1alpha1.Member{}, false
}

// resolve is [ResolveMember] on the gateway's members.
func (ms *members) resolve(ref string) (v1alpha1.Member, bool) {
	return ResolveMember(ms.source, ref)
}

// memberNotFound is the message of a 404 for a reference that names no
// member.
func memberNotFound(ref string) string {
	return "member " + quote(ref) + " not found (by name, pane id, terminal id or session id)"
}
