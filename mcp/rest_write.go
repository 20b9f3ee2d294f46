package mcp

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// WriteResult is the body of a successful POST or DELETE /members: the
// member and what happened to it, kubectl-style (created, configured,
// unchanged, deleted).
type WriteResult struct {
	Result string     `json:"result"`
	Member MemberView `json:"member"`
	// Terminating (a DELETE with ?wait=true): the member's tab was still
	// open when the stop timeout passed, its agent finishing what it was
	// given.
	Terminating bool `json:"terminating,omitempty"`
}

// createMember is POST /members, bridge_spawn for non-MCP clients. The body
// is a Member (YAML or JSON, as in a manifest file) or bridge_spawn's
// arguments; ?wait=true waits for Ready (timeoutMs as in the tool).
// ?dryRun=All, as in Kubernetes, checks everything a write checks (the
// body, the subscription boundary, that the Profile and Tenant exist, and
// the store's own checks when it has them: applyChecker) and answers with
// the result the write would have, writing nothing.
func (s *restServer) createMember(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
	if !isPrimary(id) {
		writeToolError(w, toolErr(codeForbidden, "only the primary may create members"))
		return
	}
	body, ok := s.readBody(w, r, "a Member manifest")
	if !ok {
		return
	}
	req, err := decodeMemberBody(body)
	if err != nil {
		writeToolError(w, err)
		return
	}
	if req.dryRun, err = dryRunArg(r); err != nil {
		writeToolError(w, err)
		return
	}
	q := r.URL.Query()
	if v := q.Get("wait"); v != "" {
		req.wait = v == "true"
	}
	if v := q.Get("timeoutMs"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			writeToolError(w, toolErr(codeInvalidArgument, "timeoutMs: want a whole number of milliseconds from 0 to %d", MaxTimeout.Milliseconds()))
			return
		}
		timeout, err := timeoutArg(ms)
		if err != nil {
			writeToolError(w, err)
			return
		}
		req.timeout = timeout
	}
	view, result, err := s.members.apply(r.Context(), req)
	if err != nil {
		writeToolError(w, err)
		return
	}
	status := http.StatusOK
	if result == resultCreated {
		status = http.StatusCreated
	}
	writeJSON(w, status, WriteResult{Result: result, Member: view})
}

// deleteMember is DELETE /members/{paneId or name}, bridge_stop for non-MCP
// clients; unlike the tool, an unknown member is a 404. ?wait=true waits
// until the pane is closed (or the stop timeout passed: Terminating then
// says the tab is still open, its agent finishing a turn); ?now=true
// closes it at once, whatever the agent is doing (bridge_stop's force).
func (s *restServer) deleteMember(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
	if !isPrimary(id) {
		writeToolError(w, toolErr(codeForbidden, "only the primary may delete members"))
		return
	}
	ref := r.PathValue("name")
	m, ok := s.members.resolve(ref)
	if !ok {
		writeError(w, http.StatusNotFound, codeNotFound, memberNotFound(ref))
		return
	}
	q := r.URL.Query()
	did, err := s.members.stop(r.Context(), m.Name, q.Get("wait") == "true", q.Get("now") == "true", 0)
	if err != nil {
		writeToolError(w, err)
		return
	}
	if !did.existed {
		writeError(w, http.StatusNotFound, codeNotFound, "member "+quote(ref)+" not found")
		return
	}
	writeJSON(w, http.StatusOK, WriteResult{Result: resultDeleted, Member: viewOf(m), Terminating: did.closing})
}

// readBody reads a write's body within the bound, or answers 413 (what
// names what the body should be) or 400 and returns false.
func (s *restServer) readBody(w http.ResponseWriter, r *http.Request, what string) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody()))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge,
				"request body is larger than "+strconv.FormatInt(mbe.Limit, 10)+" bytes; "+what+" is far smaller")
			return nil, false
		}
		writeToolError(w, toolErr(codeInvalidArgument, "read request body: %v", err))
		return nil, false
	}
	return body, true
}

// dryRunArg reads ?dryRun=All, as in Kubernetes: check everything a write
// checks and write nothing.
func dryRunArg(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("dryRun"); v {
	case "":
		return false, nil
	case "All":
		return true, nil
	default:
		return false, toolErr(codeInvalidArgument, "dryRun: unknown value %s; want All (or leave it out)", quote(v))
	}
}

func writeToolError(w http.ResponseWriter, err error) {
	te := fromCore(err)
	writeError(w, httpStatus(te.Code), te.Code, te.Message)
}
