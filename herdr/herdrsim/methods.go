package herdrsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

type apiError struct {
	Code    string
	Message string
}

// errLine answers req with the error under id (normally req.ID). An
// invalid_request goes out with the id herdr could read from the line
// ([Server.invalidRequestID]): always "" in protocol 20.
func (s *Server) errLine(e *apiError, req Request, id string) errorLine {
	if e.Code == "invalid_request" {
		id = s.invalidRequestID(req)
	}
	return errorLine{ID: id, Error: errorBody{Code: e.Code, Message: e.Message}}
}

// invalidRequestID is the id herdr puts on its answer to a line that is not
// a valid request: protocol 22 answers a JSON object with one string "id"
// member with that id; invalid JSON, a non-string id, a duplicated id and
// protocol 20 get "".
func (s *Server) invalidRequestID(req Request) string {
	if !s.p22() || req.ID == "" {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(req.Line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	ids := 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		if key == "id" {
			ids++
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	if ids != 1 {
		return ""
	}
	return req.ID
}

// probeID is the id of a subscription setup error for entry i: protocol 20
// answers under "<id>:sub:<i>:probe", protocol 22 under the request id.
func (s *Server) probeID(req Request, i int) string {
	if s.p22() {
		return req.ID
	}
	return req.ID + ":sub:" + itoa(i) + ":probe"
}

func errorf(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// invalidRequest is herdr's answer to a line it cannot parse as a request,
// under [Server.invalidRequestID]. The message keeps the first line of the
// reason.
func (s *Server) invalidRequest(req Request, err error) errorLine {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return errorLine{ID: s.invalidRequestID(req), Error: errorBody{Code: "invalid_request", Message: "invalid request: " + msg}}
}

func workspaceNotFound(id string) *apiError {
	return errorf("workspace_not_found", "workspace %s not found", id)
}

func paneNotFound(id string) *apiError {
	return errorf("pane_not_found", "pane %s not found", id)
}

func itoa(i int) string { return strconv.Itoa(i) }

// handler answers a short request with the lock held.
type handler func(s *Server, params json.RawMessage) (typed, *apiError)

// dispatch answers one validated request.
func (s *Server) dispatch(c *conn, req Request) {
	switch req.Method {
	case "events.subscribe":
		s.subscribe(c, req)
		return
	case "worktree.create", "worktree.open", "worktree.list", "worktree.remove":
		s.worktreeMethod(c, req) // runs git outside the lock
		return
	case "events.wait", "agent.wait", "agent.prompt", "pane.wait_for_output":
		long := map[string]func(*Server, *conn, Request) *response{
			"events.wait":          (*Server).eventsWait,
			"agent.wait":           (*Server).agentWait,
			"agent.prompt":         (*Server).agentPrompt,
			"pane.wait_for_output": (*Server).waitForOutput,
		}[req.Method]
		if r := long(s, c, req); r != nil {
			if r.aerr != nil {
				c.writeLine(s.errLine(r.aerr, req, r.id))
			} else {
				c.writeLine(successLine{ID: r.id, Result: r.res})
			}
		}
		return
	}
	h := s.handler(req.Method)
	if h == nil {
		c.writeLine(s.errLine(errorf("not_implemented", "herdrsim does not model %s", req.Method), req, req.ID))
		return
	}
	s.mu.Lock()
	res, aerr := h(s, req.Params)
	s.notifyLocked()
	s.mu.Unlock()
	if aerr != nil {
		c.writeLine(s.errLine(aerr, req, req.ID))
		return
	}
	c.writeLine(successLine{ID: req.ID, Result: res})
}

func (s *Server) handler(method string) handler {
	switch method {
	case "ping":
		return (*Server).ping
	case "session.snapshot":
		return (*Server).sessionSnapshot
	case "workspace.create":
		return (*Server).workspaceCreate
	case "workspace.list":
		return (*Server).workspaceList
	case "workspace.close":
		return (*Server).workspaceClose
	case "tab.create":
		return (*Server).tabCreate
	case "tab.list":
		return (*Server).tabList
	case "tab.close":
		return (*Server).tabClose
	case "pane.list":
		return (*Server).paneList
	case "pane.get":
		return (*Server).paneGet
	case "pane.close":
		return (*Server).paneClose
	case "pane.split":
		return (*Server).paneSplit
	case "pane.read":
		return (*Server).paneRead
	case "pane.send_text":
		return (*Server).paneSendText
	case "pane.send_keys":
		return (*Server).paneSendKeys
	case "pane.send_input":
		return (*Server).paneSendInput
	case "agent.start":
		return (*Server).agentStart
	case "agent.get":
		return (*Server).agentGet
	case "agent.list":
		return (*Server).agentList
	case "agent.read":
		return (*Server).agentRead
	case "agent.send_keys":
		return (*Server).agentSendKeys
	case "agent.rename":
		return (*Server).agentRename
	}
	return nil
}

func decode(params json.RawMessage, v any) *apiError {
	if err := json.Unmarshal(params, v); err != nil {
		return errorf("invalid_request", "invalid request: %v", err)
	}
	return nil
}

func (s *Server) ping(json.RawMessage) (typed, *apiError) {
	caps := map[string]any{"live_handoff": false, "detached_server_daemon": false}
	if s.p22() {
		// herdr 0.9: live handoff (Server.Handoff) and the new capabilities,
		// endpoint generation 1 as in 0.9.0.
		caps = map[string]any{"live_handoff": true, "detached_server_daemon": false, "endpoint_protocol_generation": 1,
			"surface_interest": false, "health_check": false, "ssh_agent_registration": false}
	}
	return result("pong", "version", s.opts.Version, "protocol", s.opts.Protocol, "capabilities", caps), nil
}

// sessionSnapshot is session.snapshot: the whole model in one answer, the
// resync herdr advises after subscribing.
func (s *Server) sessionSnapshot(json.RawMessage) (typed, *apiError) {
	workspaces, tabs, panes, layouts, agents := []workspaceInfo{}, []tabInfo{}, []paneInfo{}, []layoutSnapshot{}, []agentInfo{}
	for _, ws := range s.workspaces {
		workspaces = append(workspaces, s.workspaceInfoLocked(ws))
		for _, t := range ws.tabs {
			tabs = append(tabs, s.tabInfoLocked(t))
			layouts = append(layouts, s.layoutLocked(t))
			for _, p := range t.panes {
				panes = append(panes, s.paneInfoLocked(p))
				if p.agent != nil {
					agents = append(agents, s.agentInfoLocked(p.agent))
				}
			}
		}
	}
	snap := typed{"version": s.opts.Version, "protocol": s.opts.Protocol,
		"workspaces": workspaces, "tabs": tabs, "panes": panes, "layouts": layouts, "agents": agents}
	if ws := s.activeWS; ws != nil {
		snap["focused_workspace_id"] = ws.id
		if t := ws.active; t != nil {
			snap["focused_tab_id"] = t.id
			if t.focused != nil {
				snap["focused_pane_id"] = t.focused.id
			}
		}
	}
	return result("session_snapshot", "snapshot", snap), nil
}

type createParams struct {
	WorkspaceID *string           `json:"workspace_id"`
	Cwd         *string           `json:"cwd"`
	Focus       bool              `json:"focus"`
	Label       *string           `json:"label"`
	Env         map[string]string `json:"env"`
}

func validateEnv(env map[string]string) *apiError {
	for k := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return errorf("invalid_env", "invalid environment variable name %q", k)
		}
	}
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) workspaceCreate(raw json.RawMessage) (typed, *apiError) {
	var p createParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	if err := validateEnv(p.Env); err != nil {
		return nil, err
	}
	cwd := deref(p.Cwd)
	if cwd == "" {
		cwd = s.opts.Cwd
	}
	ws := s.newWorkspaceLocked(deref(p.Label), cwd)
	t := s.newTabLocked(ws, "")
	root := s.newPaneLocked(t, cwd, p.Env)
	t.root = &layoutNode{pane: root}
	if p.Focus || s.activeWS == nil {
		s.focusTabLocked(t)
	}
	wsInfo, tInfo, pInfo := s.workspaceInfoLocked(ws), s.tabInfoLocked(t), s.paneInfoLocked(root)
	s.emitLocked("workspace_created", typed{"workspace": wsInfo})
	s.emitLocked("tab_created", typed{"tab": tInfo})
	s.emitLocked("pane_created", typed{"pane": pInfo})
	s.emitLocked("layout_updated", typed{"layout": s.layoutLocked(t)})
	if p.Focus {
		s.emitLocked("workspace_focused", typed{"workspace_id": ws.id})
	}
	return result("workspace_created", "workspace", wsInfo, "tab", tInfo, "root_pane", pInfo), nil
}

func (s *Server) workspaceList(json.RawMessage) (typed, *apiError) {
	out := []workspaceInfo{}
	for _, ws := range s.workspaces {
		out = append(out, s.workspaceInfoLocked(ws))
	}
	return result("workspace_list", "workspaces", out), nil
}

// workspace.close. In protocol 22 a workspace that still has linked
// worktree workspaces ([Server.AddLinkedWorkspace]) is closed only with
// close_group, which closes them too (linked ones first); protocol 20
// knows no close_group and closes the one workspace.
func (s *Server) workspaceClose(raw json.RawMessage) (typed, *apiError) {
	var p struct {
		WorkspaceID string `json:"workspace_id"`
		CloseGroup  bool   `json:"close_group"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	ws := s.findWorkspaceLocked(p.WorkspaceID)
	if ws == nil {
		return nil, workspaceNotFound(p.WorkspaceID)
	}
	closing := []*workspace{ws}
	if s.p22() {
		if linked := s.linkedWorkspacesLocked(ws); len(linked) > 0 {
			if !p.CloseGroup {
				return nil, errorf("workspace_group_close_required",
					"workspace %s has %d linked worktree workspaces; close them first or pass close_group", ws.id, len(linked))
			}
			closing = append(linked, ws)
		}
	}
	for _, w := range closing {
		info := s.workspaceInfoLocked(w)
		s.removeWorkspaceLocked(w)
		s.emitLocked("workspace_closed", typed{"workspace_id": w.id, "workspace": info})
	}
	s.settleFocusLocked()
	return result("ok"), nil
}

// targetWorkspaceLocked resolves an optional workspace_id, defaulting to the
// active workspace.
func (s *Server) targetWorkspaceLocked(id *string) (*workspace, *apiError) {
	if id != nil {
		ws := s.findWorkspaceLocked(*id)
		if ws == nil {
			return nil, workspaceNotFound(*id)
		}
		return ws, nil
	}
	if s.activeWS == nil {
		return nil, errorf("no_active_workspace", "no active workspace")
	}
	return s.activeWS, nil
}

func (s *Server) tabCreate(raw json.RawMessage) (typed, *apiError) {
	var p createParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	if err := validateEnv(p.Env); err != nil {
		return nil, err
	}
	ws, aerr := s.targetWorkspaceLocked(p.WorkspaceID)
	if aerr != nil {
		return nil, aerr
	}
	cwd := deref(p.Cwd)
	if cwd == "" {
		cwd = s.opts.Cwd
		if ws.active != nil && ws.active.focused != nil {
			cwd = ws.active.focused.cwd
		}
	}
	t := s.newTabLocked(ws, deref(p.Label))
	root := s.newPaneLocked(t, cwd, p.Env)
	t.root = &layoutNode{pane: root}
	if p.Focus {
		s.focusTabLocked(t)
	}
	tInfo, pInfo := s.tabInfoLocked(t), s.paneInfoLocked(root)
	s.emitLocked("tab_created", typed{"tab": tInfo})
	s.emitLocked("pane_created", typed{"pane": pInfo})
	s.emitLocked("layout_updated", typed{"layout": s.layoutLocked(t)})
	if p.Focus {
		s.emitLocked("tab_focused", typed{"tab_id": t.id, "workspace_id": ws.id})
	}
	return result("tab_created", "tab", tInfo, "root_pane", pInfo), nil
}

func (s *Server) tabList(raw json.RawMessage) (typed, *apiError) {
	var p struct {
		WorkspaceID *string `json:"workspace_id"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	if p.WorkspaceID != nil && s.findWorkspaceLocked(*p.WorkspaceID) == nil {
		return nil, workspaceNotFound(*p.WorkspaceID)
	}
	out := []tabInfo{}
	for _, ws := range s.workspaces {
		if p.WorkspaceID != nil && ws.id != *p.WorkspaceID {
			continue
		}
		for _, t := range ws.tabs {
			out = append(out, s.tabInfoLocked(t))
		}
	}
	return result("tab_list", "tabs", out), nil
}

// tab.close: tab_closed (+ workspace_closed when it was the last tab) and no
// per-pane pane_closed.
func (s *Server) tabClose(raw json.RawMessage) (typed, *apiError) {
	var p struct {
		TabID string `json:"tab_id"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	t := s.findTabLocked(p.TabID)
	if t == nil {
		return nil, errorf("tab_not_found", "tab %s not found", p.TabID)
	}
	ws := t.ws
	wsInfo := s.workspaceInfoLocked(ws)
	wsGone := s.removeTabLocked(t)
	s.emitLocked("tab_closed", typed{"tab_id": t.id, "workspace_id": ws.id})
	if wsGone {
		s.emitLocked("workspace_closed", typed{"workspace_id": ws.id, "workspace": wsInfo})
	}
	s.settleFocusLocked()
	return result("ok"), nil
}

func (s *Server) paneList(raw json.RawMessage) (typed, *apiError) {
	var p struct {
		WorkspaceID *string `json:"workspace_id"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	if p.WorkspaceID != nil && s.findWorkspaceLocked(*p.WorkspaceID) == nil {
		return nil, workspaceNotFound(*p.WorkspaceID)
	}
	out := []paneInfo{}
	for _, pn := range s.allPanesLocked() {
		if p.WorkspaceID == nil || pn.tab.ws.id == *p.WorkspaceID {
			out = append(out, s.paneInfoLocked(pn))
		}
	}
	return result("pane_list", "panes", out), nil
}

// paneTarget is embedded in the params of every method that names a pane by
// pane_id.
type paneTarget struct {
	PaneID string `json:"pane_id"`
}

func (t *paneTarget) paneID() string { return t.PaneID }

// decodePaneLocked decodes params into p and resolves the pane it names.
func (s *Server) decodePaneLocked(raw json.RawMessage, p interface{ paneID() string }) (*pane, *apiError) {
	if err := decode(raw, p); err != nil {
		return nil, err
	}
	pn := s.findPaneLocked(p.paneID())
	if pn == nil {
		return nil, paneNotFound(p.paneID())
	}
	return pn, nil
}

func (s *Server) paneGet(raw json.RawMessage) (typed, *apiError) {
	pn, aerr := s.decodePaneLocked(raw, &paneTarget{})
	if aerr != nil {
		return nil, aerr
	}
	return result("pane_info", "pane", s.paneInfoLocked(pn)), nil
}

// pane.close: pane_closed, then layout_updated when the tab survives; the
// last pane of a non-last tab takes the tab with it silently; the last pane
// of the workspace adds workspace_closed.
func (s *Server) paneClose(raw json.RawMessage) (typed, *apiError) {
	pn, aerr := s.decodePaneLocked(raw, &paneTarget{})
	if aerr != nil {
		return nil, aerr
	}
	t, ws := pn.tab, pn.tab.ws
	wsInfo := s.workspaceInfoLocked(ws)
	tabGone, wsGone := s.removePaneLocked(pn)
	s.emitLocked("pane_closed", typed{"pane_id": pn.id, "workspace_id": ws.id})
	switch {
	case wsGone:
		s.emitLocked("workspace_closed", typed{"workspace_id": ws.id, "workspace": wsInfo})
	case !tabGone:
		s.emitLocked("layout_updated", typed{"layout": s.layoutLocked(t)})
	}
	s.settleFocusLocked()
	return result("ok"), nil
}

func (s *Server) paneSplit(raw json.RawMessage) (typed, *apiError) {
	var p struct {
		TargetPaneID *string           `json:"target_pane_id"`
		WorkspaceID  *string           `json:"workspace_id"`
		Direction    string            `json:"direction"`
		Ratio        *float64          `json:"ratio"`
		Cwd          *string           `json:"cwd"`
		Focus        bool              `json:"focus"`
		Env          map[string]string `json:"env"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	if err := validateEnv(p.Env); err != nil {
		return nil, err
	}
	var target *pane
	if p.TargetPaneID != nil {
		if target = s.findPaneLocked(*p.TargetPaneID); target == nil {
			return nil, paneNotFound(*p.TargetPaneID)
		}
	} else {
		ws, aerr := s.targetWorkspaceLocked(p.WorkspaceID)
		if aerr != nil {
			return nil, aerr
		}
		if ws.active == nil || ws.active.focused == nil {
			return nil, errorf("no_active_pane", "workspace %s has no focused pane", ws.id)
		}
		target = ws.active.focused
	}
	ratio := 0.5
	if p.Ratio != nil {
		if *p.Ratio <= 0 || *p.Ratio >= 1 {
			return nil, errorf("invalid_ratio", "ratio %v must be between 0 and 1", *p.Ratio)
		}
		ratio = *p.Ratio
	}
	cwd := deref(p.Cwd)
	if cwd == "" {
		cwd = target.cwd
	}
	t := target.tab
	pn := s.newPaneLocked(t, cwd, p.Env)
	s.splitLayoutLocked(target, pn, p.Direction, ratio)
	if p.Focus {
		t.focused = pn
		s.focusTabLocked(t)
	}
	info := s.paneInfoLocked(pn)
	s.emitLocked("pane_created", typed{"pane": info})
	s.emitLocked("layout_updated", typed{"layout": s.layoutLocked(t)})
	if p.Focus {
		s.emitLocked("pane_focused", typed{"pane_id": pn.id, "workspace_id": t.ws.id})
	}
	return result("pane_info", "pane", info), nil
}

// readParams serves pane.read (pane_id) and agent.read (target).
type readParams struct {
	paneTarget
	agentTarget
	Source string `json:"source"`
	Lines  *int   `json:"lines"`
	Format string `json:"format"`
}

func (s *Server) paneRead(raw json.RawMessage) (typed, *apiError) {
	var p readParams
	pn, aerr := s.decodePaneLocked(raw, &p)
	if aerr != nil {
		return nil, aerr
	}
	s.scrollHistoryLocked(pn, p.Source, p.Lines)
	return result("pane_read", "read", s.readLocked(pn, p.Source, p.Lines, p.Format)), nil
}

// readLocked renders a pane read. Recent sources return the last `lines`
// (default 80, at most 1000); visible and detection return the viewport.
// revision is always 0, as in herdr's read handler.
func (s *Server) readLocked(p *pane, source string, lines *int, format string) paneRead {
	if format == "" {
		format = "text"
	}
	all := p.lines()
	n := areaHeight
	if source == "recent" || source == "recent_unwrapped" {
		n = 80
		if lines != nil {
			n = *lines
		}
		n = min(n, 1000)
	}
	shown, truncated := all, false
	if len(all) > n {
		shown, truncated = all[len(all)-n:], source != "visible" && source != "detection"
	}
	return paneRead{
		PaneID: p.id, WorkspaceID: p.tab.ws.id, TabID: p.tab.id,
		Source: source, Format: format, Text: strings.Join(shown, "\n"),
		Truncated: truncated,
	}
}

func (s *Server) paneSendText(raw json.RawMessage) (typed, *apiError) {
	var p struct {
		paneTarget
		Text string `json:"text"`
	}
	pn, aerr := s.decodePaneLocked(raw, &p)
	if aerr != nil {
		return nil, aerr
	}
	s.typeLocked(pn, p.Text)
	return result("ok"), nil
}

func (s *Server) paneSendKeys(raw json.RawMessage) (typed, *apiError) {
	var p struct {
		paneTarget
		Keys []string `json:"keys"`
	}
	pn, aerr := s.decodePaneLocked(raw, &p)
	if aerr != nil {
		return nil, aerr
	}
	if err := s.sendKeysLocked(pn, p.Keys); err != nil {
		return nil, err
	}
	return result("ok"), nil
}

func (s *Server) paneSendInput(raw json.RawMessage) (typed, *apiError) {
	var p struct {
		paneTarget
		Text string   `json:"text"`
		Keys []string `json:"keys"`
	}
	pn, aerr := s.decodePaneLocked(raw, &p)
	if aerr != nil {
		return nil, aerr
	}
	for _, k := range p.Keys {
		if _, ok := parseKey(k); !ok {
			return nil, errorf("invalid_key", "invalid key %q", k)
		}
	}
	s.pasteLocked(pn, p.Text)
	return result("ok"), s.sendKeysLocked(pn, p.Keys)
}

// typeLocked writes raw bytes to the pane: a CR or LF submits the line.
func (s *Server) typeLocked(p *pane, text string) {
	for text != "" {
		i := strings.IndexAny(text, "\r\n")
		if i < 0 {
			p.input += text
			break
		}
		p.input += text[:i]
		text = text[i+1:]
		s.submitLocked(p)
	}
	p.revision++
}

// pasteLocked inserts text as one bracketed paste: newlines stay in the
// line being typed.
func (s *Server) pasteLocked(p *pane, text string) {
	if text != "" {
		p.input += text
		p.revision++
	}
}

// sendKeysLocked validates every key before sending any.
func (s *Server) sendKeysLocked(p *pane, keys []string) *apiError {
	parsed := make([]string, len(keys))
	for i, k := range keys {
		name, ok := parseKey(k)
		if !ok {
			return errorf("invalid_key", "invalid key %q", k)
		}
		parsed[i] = name
	}
	for _, k := range parsed {
		switch k {
		case "enter":
			s.submitLocked(p)
		case "backspace":
			if r := []rune(p.input); len(r) > 0 {
				p.input = string(r[:len(r)-1])
			}
		case "ctrl+c", "ctrl+u":
			p.input = ""
		case "space":
			p.input += " "
		case "tab":
			p.input += "\t"
		default:
			if len([]rune(k)) == 1 {
				p.input += k
			}
		}
		p.revision++
	}
	return nil
}

// submitLocked presses Enter: the typed line is committed to the screen and
// delivered to whatever runs in the pane.
func (s *Server) submitLocked(p *pane) {
	line := p.input
	p.input = ""
	p.screen = append(p.screen, strings.Split(line, "\n")...)
	p.revision++
	s.deliverLocked(p, line)
}
