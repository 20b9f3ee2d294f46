package multihost

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/mcp"
)

// putProfile puts the claude Profile under prefix, as etcdctl would.
func putProfile(tb testing.TB, prefix string) {
	tb.Helper()
	if _, err := etcdClient(tb).Put(context.Background(), prefix+"/profiles/claude", claudeProfile); err != nil {
		tb.Fatal(err)
	}
}

// untilReady waits until each node sees every named node Ready.
func untilReady(t *testing.T, nodes []*fleetNode, names ...string) {
	t.Helper()
	for _, n := range nodes {
		for _, name := range names {
			n.untilNode(t, name, "Ready", nodeReady)
		}
	}
}

// A member that runs on node b shows, on node a, the status b keeps of it:
// POST /members?wait=true on a returns once b runs it Ready, and a's GET
// /members, GET /members/{name} and `fleetd get members -o wide` show its
// phase, agent, pane and node. Nothing secret is in what b published.
func TestStatus_AMemberOnAnotherNodeShowsItsStatus(t *testing.T) {
	prefix := uniquePrefix("/status-remote")
	putProfile(t, prefix)
	a := startNode(t, prefix, "a")
	b := startNode(t, prefix, "b")
	untilReady(t, []*fleetNode{a, b}, "a", "b")

	code, body := a.do(t, "POST", "/members?wait=true", pinned("remote", "b"))
	if code != http.StatusCreated {
		t.Fatalf("POST /members?wait=true on a = %d %s", code, body)
	}
	var written mcp.WriteResult
	err := json.Unmarshal([]byte(body), &written)
	if spawned := written.Member; err != nil || spawned.Phase != v1alpha1.PhaseReady || spawned.PaneID == "" {
		t.Fatalf("POST /members?wait=true on a for a member on b answered %s (%v), want it Ready with its pane", body, err)
	}
	panes := agentPanes(b.info.Sim, "remote")
	if len(panes) != 1 || panes[0] != written.Member.PaneID {
		t.Fatalf("b's herdr runs remote in %v; a answered pane %s", panes, written.Member.PaneID)
	}
	if got := agentPanes(a.info.Sim, "remote"); len(got) != 0 {
		t.Errorf("a's herdr runs remote too: %v", got)
	}

	code, body = a.do(t, "GET", "/members", "")
	var list mcp.MemberList
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list.Items) != 1 {
		t.Fatalf("GET /members on a = %d %s", code, body)
	}
	m := list.Items[0]
	if m.Status.Phase != v1alpha1.PhaseReady || m.Status.NodeName != "b" || m.Status.PaneID != panes[0] || m.Status.AgentStatus == "" ||
		m.Status.SessionID == "" || readyOf(m).Status != v1alpha1.ConditionTrue {
		t.Errorf("remote on a's GET /members: %+v, want b's status of it: Ready, its pane %s, its agent", m.Status, panes[0])
	}
	code, body = a.do(t, "GET", "/members/remote", "")
	var one v1alpha1.Member
	if err := json.Unmarshal([]byte(body), &one); code != http.StatusOK || err != nil || one.Status.PaneID != panes[0] {
		t.Errorf("GET /members/remote on a = %d %s", code, body)
	}

	var out []byte
	cmd := exec.Command(fleetdBinary(t), "get", "members", "-o", "wide")
	cmd.Env = append(os.Environ(), "FLEETD_SERVER="+a.info.URL, "FLEETD_TOKEN="+a.token)
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fleetd get members -o wide: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("fleetd get members -o wide on a:\n%s", out)
	}
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	cell := func(col string) string {
		for i, h := range header {
			if h == col && i < len(row) {
				return row[i]
			}
		}
		return ""
	}
	if cell("NAME") != "remote" || cell("PHASE") != v1alpha1.PhaseReady || cell("PANE") != panes[0] || cell("NODE") != "b" || cell("AGENT") == "-" {
		t.Errorf("fleetd get members -o wide on a:\n%s\nwant remote Ready on b in pane %s with its agent", out, panes[0])
	}

	// bridge_list through a's gateway, as the primary: the same.
	primary := a.primary(t, context.Background())
	res, err := primary.CallTool(context.Background(), &sdk.CallToolParams{Name: "bridge_list"})
	if err != nil || res.IsError {
		t.Fatalf("bridge_list on a: %+v %v", res, err)
	}
	var listed mcp.ListOutput
	if b, _ := json.Marshal(res.StructuredContent); json.Unmarshal(b, &listed) != nil || len(listed.Members) != 1 ||
		listed.Members[0].Phase != v1alpha1.PhaseReady || listed.Members[0].PaneID != panes[0] || listed.Members[0].AgentStatus == "" {
		t.Errorf("bridge_list on a: %+v, want remote Ready in pane %s with its agent", res.StructuredContent, panes[0])
	}

	// What b published holds neither the primary's token nor the member's.
	resp, err := etcdClient(t).Get(context.Background(), prefix+"/status/remote")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("remote's published status: %v %v", resp, err)
	}
	env, _ := b.info.Sim.PaneEnv(panes[0])
	for what, secret := range map[string]string{"the primary token": a.token, "the member's FLEETD_TOKEN": env["FLEETD_TOKEN"]} {
		if secret == "" {
			t.Fatalf("no %s to look for", what)
		}
		if strings.Contains(string(resp.Kvs[0].Value), secret) {
			t.Errorf("the published status holds %s", what)
		}
	}
}

// A node that is killed leaves its published statuses behind (it cannot
// delete them); the other node shows its members NodeLost, not the last
// Ready they published.
func TestStatus_AKilledNodesMembersShowNodeLost(t *testing.T) {
	prefix := uniquePrefix("/status-lost")
	putProfile(t, prefix)
	const ttl = 2 * time.Second
	a, _ := runDaemon(t, daemon.Config{Sim: true, SimValidator: validated.Schema(), StateDir: t.TempDir(),
		Etcd: &daemon.EtcdConfig{Endpoints: cluster.Endpoints(), Prefix: prefix, Node: "a", NodeTTL: ttl}})
	proxy := startProxy(t, cluster.Endpoints()[0])
	b, stopB := runDaemon(t, daemon.Config{Sim: true, SimValidator: validated.Schema(), StateDir: t.TempDir(),
		Etcd: &daemon.EtcdConfig{Endpoints: []string{proxy.URL()}, Prefix: prefix, Node: "b", NodeTTL: ttl, RequestTimeout: time.Second}})
	untilReady(t, []*fleetNode{a, b}, "a", "b")
	if code, body := a.do(t, "POST", "/members?wait=true", pinned("onb", "b")); code != http.StatusCreated ||
		!strings.Contains(body, `"phase": "Ready"`) {
		t.Fatalf("POST /members?wait=true = %d %s", code, body)
	}

	proxy.Cut()
	stopB()
	m := a.untilMember(t, "onb", "NodeLost", func(m v1alpha1.Member) bool { return readyOf(m).Reason == v1alpha1.ReasonNodeLost })
	if m.Status.Phase == v1alpha1.PhaseReady || m.Status.PaneID != "" || readyOf(m).Status != v1alpha1.ConditionUnknown || m.Status.NodeName != "b" {
		t.Errorf("onb after b was killed: %+v, want Ready=Unknown NodeLost on b, not b's last status", m.Status)
	}
	if resp, err := etcdClient(t).Get(context.Background(), prefix+"/status/onb"); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("b's last published status of onb: %v %v; want it still there (b was killed), shown as NodeLost all the same", resp, err)
	}
}

// An idle converged fleet of two nodes writes nothing to etcd: statuses
// are written when they change, not periodically, so over an interval
// longer than the status coalescing and the node's own refresh the
// prefix sees at most a couple of writes, not one per member.
func TestStatus_AnIdleFleetMakesNoWritesPerMember(t *testing.T) {
	prefix := uniquePrefix("/status-idle")
	putProfile(t, prefix)
	a := startNode(t, prefix, "a")
	b := startNode(t, prefix, "b")
	untilReady(t, []*fleetNode{a, b}, "a", "b")
	names := []string{"m1", "m2", "m3", "m4", "m5", "m6"}
	for _, name := range names {
		if code, body := a.do(t, "POST", "/members", `{"profile":"claude","name":"`+name+`"}`); code != http.StatusCreated {
			t.Fatalf("POST /members = %d %s", code, body)
		}
	}
	for _, n := range []*fleetNode{a, b} {
		for _, name := range names {
			n.untilMember(t, name, "Ready with its pane", func(m v1alpha1.Member) bool {
				return m.Status.Phase == v1alpha1.PhaseReady && m.Status.PaneID != "" && m.Status.AgentStatus == "idle"
			})
		}
	}

	cli := etcdClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, err := cli.Get(ctx, prefix+"/nodes/a")
	if err != nil {
		t.Fatal(err)
	}
	w := cli.Watch(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1))
	const interval = 4 * time.Second // > DefaultStatusInterval and the node refresh (2 s), twice
	deadline := time.After(interval)
	var writes []string
	for done := false; !done; {
		select {
		case resp := <-w:
			for _, ev := range resp.Events {
				writes = append(writes, ev.Type.String()+" "+string(ev.Kv.Key))
			}
		case <-deadline:
			done = true
		}
	}
	t.Logf("an idle converged fleet of 2 nodes and %d members: %d etcd writes in %s", len(names), len(writes), interval)
	if len(writes) > 2 {
		t.Errorf("an idle fleet wrote %d times in %s: %v; want at most 2, whatever the number of members", len(writes), interval, writes)
	}
}

// consolePage logs into n's console with the fleet's token and returns
// the page at path.
func (n *fleetNode) consolePage(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, n.info.URL+"/ui/codes", nil)
	req.Header.Set("Authorization", "Bearer "+n.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var code struct{ Path string }
	err = json.NewDecoder(resp.Body).Decode(&code)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("POST /ui/codes = %s (%v)", resp.Status, err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := c.Get(n.info.URL + code.Path); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, err = c.Get(n.info.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %s", path, resp.Status)
	}
	return string(b)
}

// The console of node a lists b's member with b's status and, on its
// page, the messaging state b published of it (its first prompt's
// delivery); its terminal is not read through a's herdr, the page names
// b instead; GET /members/{name}/logs on a says which node holds it.
func TestStatus_TheConsoleAndLogsOnAnotherNode(t *testing.T) {
	prefix := uniquePrefix("/status-console")
	putProfile(t, prefix)
	a := startNode(t, prefix, "a")
	b := startNode(t, prefix, "b")
	untilReady(t, []*fleetNode{a, b}, "a", "b")
	if code, body := a.do(t, "POST", "/members", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: far}\nspec: {profile: claude, nodeName: b, prompt: hello}\n"); code != http.StatusCreated {
		t.Fatalf("POST /members = %d %s", code, body)
	}
	m := a.untilMember(t, "far", "Ready with its pane", func(m v1alpha1.Member) bool { return m.Status.Phase == v1alpha1.PhaseReady && m.Status.PaneID != "" })

	overview := a.consolePage(t, "/ui/")
	if !strings.Contains(overview, ">far<") || !strings.Contains(overview, ">b<") {
		t.Errorf("a's console overview does not list far on b:\n%s", overview)
	}
	deadline := time.Now().Add(30 * time.Second)
	var page string
	for {
		page = a.consolePage(t, "/ui/members/far")
		if strings.Contains(page, "last delivery delivered") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(page, "last delivery delivered") {
		t.Errorf("a's console page of far shows no delivery of its first prompt (b's messaging state):\n%s", page)
	}
	if !strings.Contains(page, `id="remote"`) || strings.Contains(page, `id="tail"`) || !strings.Contains(page, m.Status.PaneID) {
		t.Errorf("a's console page of far: want its pane, the note that node b holds its terminal, no tail:\n%s", page)
	}
	code, body := a.do(t, "GET", "/members/far/logs", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "runs on node b") {
		t.Errorf("GET /members/far/logs on a = %d %s, want 503 naming node b", code, body)
	}
	if code, body := b.do(t, "GET", "/members/far/logs", ""); code != http.StatusOK {
		t.Errorf("GET /members/far/logs on b = %d %s", code, body)
	}
}
