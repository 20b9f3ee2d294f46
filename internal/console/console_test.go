package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/sse"
	desired "github.com/fleetd-dev/fleetd/internal/store"
)

var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	t     *testing.T
	fleet *fleet
	clock *clock.Fake
	srv   *httptest.Server
	con   *Console
}

func newEnv(t *testing.T, o *Options, members ...v1alpha1.Member) *env {
	t.Helper()
	f := newFleet(members...)
	clk := clock.NewFake(epoch)
	opts := Options{}
	if o != nil {
		opts = *o
	}
	opts.Members, opts.Messages, opts.Store, opts.Tokens, opts.Clock = f, messages{f}, store{f}, fakeTokens{}, clk
	con, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	return &env{t: t, fleet: f, clock: clk, srv: srv, con: con}
}

// browser is a client with a cookie jar that does not follow redirects.
func (e *env) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *env) mint(token string) (*http.Response, CodeResponse) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/ui/codes", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var code CodeResponse
	if resp.StatusCode == http.StatusOK {
		decodeJSON(e.t, resp.Body, &code)
	}
	return resp, code
}

func (e *env) get(c *http.Client, path string) (*http.Response, string) {
	e.t.Helper()
	resp, err := c.Get(e.srv.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login returns a logged-in browser and its CSRF token.
// events opens the event stream at path with c. The stream's context
// (returned) ends after 10 s, so that a stream that never ends fails the
// test instead of hanging it; the body is closed when the test ends.
func (e *env) events(c *http.Client, path string) (*http.Response, context.Context) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	e.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+path, nil)
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp, ctx
}

func (e *env) login() (*http.Client, string) {
	e.t.Helper()
	_, code := e.mint(primaryToken)
	c := e.browser()
	if resp, _ := e.get(c, code.Path); resp.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("login: %s", resp.Status)
	}
	_, page := e.get(c, "/ui/")
	i := strings.Index(page, `<meta name="csrf" content="`)
	if i < 0 {
		e.t.Fatalf("overview has no CSRF meta tag:\n%s", page)
	}
	rest := page[i+len(`<meta name="csrf" content="`):]
	return c, rest[:strings.IndexByte(rest, '"')]
}

func (e *env) post(c *http.Client, path string, form url.Values, header map[string]string) (int, result) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r result
	decodeJSON(e.t, resp.Body, &r)
	return resp.StatusCode, r
}

func decodeJSON(t *testing.T, r io.Reader, v any) {
	t.Helper()
	if err := jsonDecode(r, v); err != nil {
		t.Fatalf("decode: %v", err)
	}
}

func TestLogin_CodeIsExchangedOnceForAStrictHttpOnlyCookie(t *testing.T) {
	e := newEnv(t, nil)
	if resp, _ := e.mint(""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("mint without a token: %s, want 401", resp.Status)
	}
	if resp, _ := e.mint(workerToken); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("mint with a worker's token: %s, want 401", resp.Status)
	}
	resp, code := e.mint(primaryToken)
	if resp.StatusCode != http.StatusOK || len(code.Code) < 40 || !code.ExpiresAt.Equal(epoch.Add(DefaultCodeTTL)) {
		t.Fatalf("mint = %s %+v, want a long code valid for %s", resp.Status, code, DefaultCodeTTL)
	}
	if strings.Contains(code.Path, primaryToken) {
		t.Fatal("the login path holds the primary token")
	}

	c := e.browser()
	resp, _ = e.get(c, code.Path)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login: %s to %q, want 303 to /ui/ (no code in it)", resp.Status, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies, want 1", len(cookies))
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui" || ck.Value == code.Code {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui and a value that is not the code", ck)
	}
	if resp, body := e.get(c, "/ui/"); resp.StatusCode != http.StatusOK || strings.Contains(body, code.Code) || strings.Contains(body, primaryToken) {
		t.Errorf("overview after login: %s; holds the code or token: %v", resp.Status, strings.Contains(body, code.Code))
	}

	again := e.browser()
	if resp, body := e.get(again, code.Path); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "expired or was already used") {
		t.Errorf("reused code: %s, want 401 saying it was used", resp.Status)
	}
	if resp, _ := e.get(again, "/ui/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the reused code's browser reached the overview: %s", resp.Status)
	}
}

// TestLogin_ExpiredCodeIsRefused: an expired link says so, and how to get
// a new one from this fleetd: `fleetd ui` with the --server it listens on
// (this one is not on the default port).
func TestLogin_ExpiredCodeIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	_, code := e.mint(primaryToken)
	e.clock.Step(DefaultCodeTTL)
	resp, body := e.get(e.browser(), code.Path)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("code after its TTL: %s, want 401", resp.Status)
	}
	if want := "<pre>fleetd ui --server " + e.srv.URL + "</pre>"; !strings.Contains(body, want) {
		t.Errorf("the expired link's page does not say %q:\n%s", want, body)
	}
}

func TestLogin_UICommandNamesTheServerUnlessDefault(t *testing.T) {
	for host, want := range map[string]string{
		"127.0.0.1:8080":  "fleetd ui",
		"localhost:8080":  "fleetd ui",
		"127.0.0.1:18080": "fleetd ui --server http://127.0.0.1:18080",
		"[::1]:8080":      "fleetd ui --server http://[::1]:8080",
	} {
		if got := uiCommand(host); got != want {
			t.Errorf("uiCommand(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestLogin_CodesAreBounded(t *testing.T) {
	e := newEnv(t, &Options{MaxCodes: 2})
	for range 2 {
		if resp, _ := e.mint(primaryToken); resp.StatusCode != http.StatusOK {
			t.Fatalf("mint: %s", resp.Status)
		}
	}
	if resp, _ := e.mint(primaryToken); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("third unused code: %s, want 429", resp.Status)
	}
	e.clock.Step(DefaultCodeTTL)
	if resp, _ := e.mint(primaryToken); resp.StatusCode != http.StatusOK {
		t.Errorf("after the others expired: %s, want 200", resp.Status)
	}
}

func TestSession_ExpiresWhenIdleOrTooOldAndOnLogout(t *testing.T) {
	tests := []struct {
		name string
		run  func(e *env, c *http.Client, csrf string)
	}{
		{"idle", func(e *env, _ *http.Client, _ string) { e.clock.Step(DefaultSessionIdle) }},
		{"absolute", func(e *env, c *http.Client, _ string) {
			for range DefaultSessionLifetime / (DefaultSessionIdle / 2) {
				e.clock.Step(DefaultSessionIdle / 2)
				if resp, _ := e.get(c, "/ui/"); resp.StatusCode != http.StatusOK && e.clock.Now().Sub(epoch) < DefaultSessionLifetime {
					e.t.Fatalf("session ended early, at %s", e.clock.Now().Sub(epoch))
				}
			}
		}},
		{"logout", func(e *env, c *http.Client, csrf string) {
			if status, r := e.post(c, "/ui/logout", nil, map[string]string{"Origin": e.srv.URL, "X-CSRF-Token": csrf}); status != http.StatusOK || r.Redirect != "/ui/login" {
				e.t.Fatalf("logout: %d %+v", status, r)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			c, csrf := e.login()
			tt.run(e, c, csrf)
			if resp, _ := e.get(c, "/ui/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
				t.Errorf("overview after the session ended: %s to %q, want 303 to /ui/login", resp.Status, resp.Header.Get("Location"))
			}
		})
	}
}

func TestSession_NewLoginOverTheBoundEndsTheLeastRecentlyUsed(t *testing.T) {
	e := newEnv(t, &Options{MaxSessions: 2})
	first, _ := e.login()
	e.clock.Step(time.Second)
	second, _ := e.login()
	e.clock.Step(time.Second)
	e.get(first, "/ui/") // first is now the more recent
	e.clock.Step(time.Second)
	third, _ := e.login()
	for name, want := range map[*http.Client]int{first: 200, second: 303, third: 200} {
		if resp, _ := e.get(name, "/ui/"); resp.StatusCode != want {
			t.Errorf("session: %s, want %d", resp.Status, want)
		}
	}
}

func TestUnauthenticated_PagesRedirectToLoginAndTheRestIsRefused(t *testing.T) {
	e := newEnv(t, nil, member("a", v1alpha1.PhaseReady))
	c := e.browser()
	for _, path := range []string{"/ui/", "/ui/members/a", "/ui/apply", "/ui"} {
		resp, _ := e.get(c, path)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || (loc != "/ui/login" && path != "/ui") {
			t.Errorf("GET %s: %s to %q, want 303 to /ui/login", path, resp.Status, loc)
		}
	}
	if resp, body := e.get(c, "/ui/login"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "fleetd ui") {
		t.Errorf("login page: %s, want one that says to run `fleetd ui`", resp.Status)
	}
	if resp, _ := e.get(c, "/ui/events"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("events: %s, want 401", resp.Status)
	}
	if status, _ := e.post(c, "/ui/members/a/delete", nil, map[string]string{"Origin": e.srv.URL}); status != http.StatusUnauthorized {
		t.Errorf("delete: %d, want 401", status)
	}
	if _, ok := e.fleet.Member("a"); !ok {
		t.Error("an unauthenticated POST deleted the member")
	}
}

func TestActions_RequireSameOriginAndTheSessionsCSRFToken(t *testing.T) {
	e := newEnv(t, nil, member("a", v1alpha1.PhaseReady))
	c, csrf := e.login()
	other, otherCSRF := e.login()
	_ = other
	form := url.Values{"content": {"do it"}}
	tests := []struct {
		name   string
		form   url.Values
		header map[string]string
		want   int
	}{
		{"no token", form, map[string]string{"Origin": e.srv.URL}, http.StatusForbidden},
		{"another session's token", form, map[string]string{"Origin": e.srv.URL, "X-CSRF-Token": otherCSRF}, http.StatusForbidden},
		{"no Origin", form, map[string]string{"X-CSRF-Token": csrf}, http.StatusForbidden},
		{"another Origin", form, map[string]string{"Origin": "http://evil.example", "X-CSRF-Token": csrf}, http.StatusForbidden},
		{"header token", form, map[string]string{"Origin": e.srv.URL, "X-CSRF-Token": csrf}, http.StatusOK},
		{"form token", url.Values{"content": {"do it"}, "csrf": {csrf}}, map[string]string{"Origin": e.srv.URL}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.fleet.sends)
			status, r := e.post(c, "/ui/members/a/send", tt.form, tt.header)
			if status != tt.want {
				t.Fatalf("send: %d %+v, want %d", status, r, tt.want)
			}
			if sent := len(e.fleet.sends) - before; (sent == 1) != (tt.want == http.StatusOK) {
				t.Errorf("%d sends made, want one only when accepted", sent)
			}
		})
	}
	want := messaging.SendRequest{From: messaging.DefaultPrimaryName, To: "a", Content: "do it"}
	if diff := cmp.Diff(want, e.fleet.sends[0]); diff != "" {
		t.Errorf("send request (-want +got):\n%s", diff)
	}
}

func TestNeedsYou_ListsDialogsQuestionsCrashLoopsAndHerdr(t *testing.T) {
	herdrDown := false
	o := &Options{Herdr: func() error {
		if herdrDown {
			return errTest("connection refused")
		}
		return nil
	}}
	blocked := member("blocked", v1alpha1.PhaseStarting)
	blocked.Status.AgentStatus = "blocked"
	blocked.Status.Conditions = []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionFalse,
		Reason: v1alpha1.ReasonAwaitingInput, Message: "the claude agent in pane p1 waits for input at a dialog; answer it in herdr: Trust this folder? <y/n>"}}
	loop := member("looping", v1alpha1.PhaseDegraded)
	loop.Status.Restarts = 4
	loop.Status.Conditions = []v1alpha1.Condition{{Type: v1alpha1.ConditionDegraded, Status: v1alpha1.ConditionTrue, Reason: v1alpha1.ReasonCrashLoop, Message: "restarted 4 times"}}
	prompting := member("prompting", v1alpha1.PhaseReady)
	prompting.Status.AgentStatus, prompting.Status.PaneID = "blocked", "w1:p2"
	o.Tails = &fakeTails{}
	e := newEnv(t, o, member("fine", v1alpha1.PhaseReady), blocked, loop, prompting)
	e.fleet.turns["asker"] = []messaging.TurnStatus{{ID: "t-9", Caller: messaging.DefaultPrimaryName, Asking: true, Question: "which config?", CreatedAt: epoch}}
	herdrDown = true

	v := e.con.overview(context.Background(), nil)
	var got []string
	for _, n := range v.Needs {
		got = append(got, n.Kind+" "+n.Member+": "+n.Text)
	}
	want := []string{
		"dialog blocked: the claude agent in pane p1 waits for input at a dialog; answer it in herdr: Trust this folder? <y/n>",
		"blocked prompting: the agent is blocked at a prompt: w1:p2: read 1 of 40 lines",
		"question asker: which config?",
		"herdr : herdr is unreachable: connection refused",
		"degraded looping: Degraded (4 restarts): CrashLoop: restarted 4 times",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Needs you (-want +got):\n%s", diff)
	}
	c, _ := e.login()
	_, page := e.get(c, "/ui/")
	if !strings.Contains(page, "Trust this folder? &lt;y/n&gt;") {
		t.Errorf("the overview does not show the dialog's text, escaped:\n%s", page)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

func TestEvents_AChangeIsPushedWithoutPolling(t *testing.T) {
	e := newEnv(t, nil, member("a", v1alpha1.PhaseStarting))
	c, _ := e.login()
	resp, ctx := e.events(c, "/ui/events")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := readEvents(resp.Body)
	first := <-events
	if !strings.Contains(first, `phase-starting">Starting<`) {
		t.Fatalf("first update does not show a Starting:\n%s", first)
	}
	e.fleet.change(func(f *fleet) {
		m := f.members["a"]
		m.Status.Phase = v1alpha1.PhaseReady
		f.members["a"] = m
	})
	select {
	case next := <-events:
		if !strings.Contains(next, `phase-ready">Ready<`) {
			t.Errorf("update after the change does not show Ready:\n%s", next)
		}
	case <-ctx.Done():
		t.Fatal("no update after a member changed")
	}
}

// readEvents returns the data of each "update" event of an event stream,
// read as a browser's EventSource reads it.
func readEvents(r io.Reader) <-chan string {
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		rd := sse.NewReader(r, 1<<20)
		for {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			if ev.Name == "update" {
				ch <- string(ev.Data)
			}
		}
	}()
	return ch
}

// TestEvents_WorkerTextCannotEndAnUpdateEarly: text a worker wrote — here
// a question with bare CRs, which a browser's EventSource reads as line
// ends — reaches the page inside one update event, whole (every line end
// read as LF): it neither ends the event early nor forges another.
func TestEvents_WorkerTextCannotEndAnUpdateEarly(t *testing.T) {
	for _, question := range []string{"reply\r\r", "x\revent: gone\r\r", "a\r\n\r\nid: 7\r\n"} {
		t.Run(fmt.Sprintf("%q", question), func(t *testing.T) {
			e := newEnv(t, nil, member("asker", v1alpha1.PhaseReady))
			e.fleet.turns["asker"] = []messaging.TurnStatus{{ID: "t-1", Caller: messaging.DefaultPrimaryName, Asking: true, Question: question, CreatedAt: epoch}}
			page, _ := e.con.fragment(context.Background(), "", nil)
			if !strings.Contains(page, question) {
				t.Fatalf("the overview does not show the question as written:\n%s", page)
			}
			c, _ := e.login()
			resp, _ := e.events(c, "/ui/events")
			ev, err := sse.NewReader(resp.Body, 1<<20).Next()
			if err != nil {
				t.Fatal(err)
			}
			want := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(page)
			if ev.Name != "update" || ev.ID != "" || string(ev.Data) != want {
				t.Errorf("the first event is %q (id %q) with %d bytes of data; want the overview whole in one update event (%d bytes):\n%s",
					ev.Name, ev.ID, len(ev.Data), len(want), ev.Data)
			}
		})
	}
}

func TestApply_DryRunShowsTheDiffAndWritesNothing(t *testing.T) {
	old := member("a", v1alpha1.PhaseReady)
	e := newEnv(t, nil, old)
	c, csrf := e.login()
	h := map[string]string{"Origin": e.srv.URL, "X-CSRF-Token": csrf}
	yaml := "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: a}\nspec: {profile: claude, prompt: review}\n"

	status, r := e.post(c, "/ui/apply", url.Values{"yaml": {yaml}, "dryRun": {"1"}}, h)
	if status != http.StatusOK || !strings.Contains(r.Diff, "+   prompt: review") || !strings.Contains(r.Message, "would be configured") {
		t.Fatalf("dry run: %d %+v, want a diff adding the prompt", status, r)
	}
	if len(e.fleet.applied) != 0 {
		t.Fatal("a dry run wrote the member")
	}
	if status, r := e.post(c, "/ui/apply", url.Values{"yaml": {yaml}}, h); status != http.StatusOK || len(e.fleet.applied) != 1 || e.fleet.applied[0].Spec.Prompt != "review" {
		t.Fatalf("apply: %d %+v, applied %v", status, r, e.fleet.applied)
	}
	if status, r := e.post(c, "/ui/apply", url.Values{"yaml": {yaml}}, h); status != http.StatusOK || r.Diff != "" || !strings.Contains(r.Message, "member a unchanged") || len(e.fleet.applied) != 1 {
		t.Fatalf("apply of the stored definition again: %d %+v, applied %d times; want unchanged, no diff, no second write", status, r, len(e.fleet.applied))
	}

	bad := []struct{ name, yaml, want string }{
		{"unknown field", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: b}\nspec: {profile: claude, colour: red}\n", "manifest.yaml:4"},
		{"unknown profile", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: b}\nspec: {profile: nope}\n", `spec.profile: no Profile named "nope"`},
		{"an invalid profile", "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: p}\nspec: {harness: claude, restartPolicy: Sometimes}\n", "manifest.yaml:4: spec.restartPolicy"},
		{"two objects", "apiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: a}\nspec: {url: https://a.example/mcp, credentialEnv: A_TOKEN}\n---\napiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: b}\nspec: {url: https://b.example/mcp, credentialEnv: B_TOKEN}\n", "want exactly one"},
		{"a profile's endpoint", "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: p}\nspec: {harness: claude, env: {ANTHROPIC_BASE_URL: https://sk-x.example}}\n", "subscription_boundary: spec.env.ANTHROPIC_BASE_URL"},
		{"a duplicate key", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: b}\nspec: {profile: claude, profile: other}\n", `line 4: key "profile" already set`},
		{"a credential", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: b}\nspec: {profile: claude, env: {ANTHROPIC_API_KEY: sk-x}}\n", "subscription_boundary: spec.env"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			status, r := e.post(c, "/ui/apply", url.Values{"yaml": {tt.yaml}, "dryRun": {"1"}}, h)
			want := http.StatusUnprocessableEntity
			if strings.HasPrefix(tt.want, "subscription_boundary") {
				want = http.StatusForbidden
			}
			if status != want || !strings.Contains(r.Error, tt.want) || strings.Contains(r.Error, "sk-x") {
				t.Errorf("apply: %d %+v, want %d with %q (and never the value)", status, r, want, tt.want)
			}
		})
	}
}

// TestApply_ProfilesAndTenants: the apply page takes a Profile or a Tenant
// too — a diff against the stored definition, then the write — and stays
// on the page (they have no page of their own).
func TestApply_ProfilesAndTenants(t *testing.T) {
	e := newEnv(t, nil)
	c, csrf := e.login()
	h := map[string]string{"Origin": e.srv.URL, "X-CSRF-Token": csrf}
	for _, tt := range []struct{ kind, yaml, changed, diff string }{
		{v1alpha1.KindProfile, "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: codex}\nspec: {harness: codex}\n",
			"apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: codex}\nspec: {harness: codex, args: [-m, gpt-5.4]}\n", "+   - gpt-5.4"},
		{v1alpha1.KindTenant, "apiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: acme}\nspec: {url: https://acme.example/mcp, credentialEnv: ACME_FLEETD_TOKEN}\n",
			"apiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: acme, labels: {team: api}}\nspec: {url: https://acme.example/mcp, credentialEnv: ACME_FLEETD_TOKEN}\n", "+     team: api"},
	} {
		what := strings.ToLower(tt.kind)
		name := map[string]string{v1alpha1.KindProfile: "codex", v1alpha1.KindTenant: "acme"}[tt.kind]
		key := desired.Key{Kind: tt.kind, Name: name}
		if status, r := e.post(c, "/ui/apply", url.Values{"yaml": {tt.yaml}, "dryRun": {"1"}}, h); status != 200 || !strings.Contains(r.Message, what+" "+name+" would be created") || e.fleet.others[key] != nil {
			t.Fatalf("dry run of a new %s: %d %+v", what, status, r)
		}
		if status, r := e.post(c, "/ui/apply", url.Values{"yaml": {tt.yaml}}, h); status != 200 || r.Message != what+" "+name+" created" || r.Redirect != "" || e.fleet.others[key] == nil {
			t.Fatalf("apply of a new %s: %d %+v", what, status, r)
		}
		status, r := e.post(c, "/ui/apply", url.Values{"yaml": {tt.changed}, "dryRun": {"1"}}, h)
		if status != 200 || !strings.Contains(r.Diff, tt.diff) || !strings.Contains(r.Message, "would be configured") {
			t.Errorf("dry run of a changed %s: %d %+v, want a diff with %q", what, status, r, tt.diff)
		}
	}
}

func TestActions_PauseResumeDeleteAnswerAck(t *testing.T) {
	e := newEnv(t, nil, member("a", v1alpha1.PhaseReady))
	c, csrf := e.login()
	h := map[string]string{"Origin": e.srv.URL, "X-CSRF-Token": csrf}
	if status, r := e.post(c, "/ui/members/a/pause", nil, h); status != 200 || !e.mustMember("a").Spec.Paused {
		t.Errorf("pause: %d %+v", status, r)
	}
	if status, r := e.post(c, "/ui/members/a/resume", nil, h); status != 200 || e.mustMember("a").Spec.Paused {
		t.Errorf("resume: %d %+v", status, r)
	}
	if status, r := e.post(c, "/ui/answer", url.Values{"turn": {"t-9"}, "content": {"config.yaml"}}, h); status != 200 {
		t.Errorf("answer: %d %+v", status, r)
	}
	if got := e.fleet.sends[len(e.fleet.sends)-1]; got.TurnID != "t-9" || got.To != "" || got.Content != "config.yaml" || got.Wait {
		t.Errorf("answer sent %+v, want the turn continued without waiting", got)
	}
	if status, _ := e.post(c, "/ui/ack", url.Values{"id": {"m-1", "m-2"}}, h); status != 200 || !cmp.Equal(e.fleet.acks, []string{"m-1", "m-2"}) {
		t.Errorf("ack: %d, acked %v", status, e.fleet.acks)
	}
	if status, r := e.post(c, "/ui/members/a/delete", nil, h); status != 200 || r.Redirect != "/ui/" {
		t.Errorf("delete: %d %+v", status, r)
	}
	if status, _ := e.post(c, "/ui/members/a/delete", nil, h); status != http.StatusNotFound {
		t.Errorf("second delete: %d, want 404", status)
	}
}

func (e *env) mustMember(name string) v1alpha1.Member {
	m, ok := e.fleet.Member(name)
	if !ok {
		e.t.Fatalf("no member %s", name)
	}
	return m
}

func TestPages_CarryACSPWithoutInlineScript(t *testing.T) {
	e := newEnv(t, nil, member("a", v1alpha1.PhaseReady))
	c, _ := e.login()
	for _, path := range []string{"/ui/", "/ui/members/a", "/ui/apply", "/ui/login"} {
		resp, body := e.get(c, path)
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, " onclick=") {
			t.Errorf("%s has an inline script", path)
		}
	}
}

func TestLineDiff(t *testing.T) {
	tests := []struct{ a, b, want string }{
		{"x\n", "x\n", ""},
		{"", "a\nb\n", "+ a\n+ b\n"},
		{"a\nb\nc\n", "a\nc\nd\n", "  a\n- b\n  c\n+ d\n"},
		{"a\nb\n", "a\n", "  a\n- b\n"},
		{"a\n", "b\na\n", "+ b\n  a\n"},
	}
	// A long definition with one line changed is diffed line by line,
	// not as everything removed and everything added.
	const lines, at = 6000, 2000
	var long, edited, want strings.Builder
	for i := range lines {
		line := fmt.Sprintf("line %d", i)
		long.WriteString(line + "\n")
		if i == at {
			edited.WriteString("changed\n")
			want.WriteString("- " + line + "\n+ changed\n")
			continue
		}
		edited.WriteString(line + "\n")
		want.WriteString("  " + line + "\n")
	}
	for _, tt := range tests {
		if got := lineDiff(tt.a, tt.b); got != tt.want {
			t.Errorf("lineDiff(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
	if diff := cmp.Diff(want.String(), lineDiff(long.String(), edited.String())); diff != "" {
		t.Errorf("lineDiff of %d lines with one changed (-want +got):\n%s", lines, diff)
	}
}

func member(name, phase string) v1alpha1.Member {
	created := epoch.Add(-time.Hour)
	return v1alpha1.Member{TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindMember},
		ObjectMeta: v1alpha1.ObjectMeta{Name: name, CreationTimestamp: &created},
		Spec:       v1alpha1.MemberSpec{Profile: "claude"},
		Status:     v1alpha1.MemberStatus{Phase: phase, AgentStatus: "idle"}}
}

// TestEvents_MemberPageReadsTheTailOncePerAgentState: a member page's
// stream reads the terminal again when the member's agent changed, not on
// every change in the fleet.
func TestEvents_MemberPageReadsTheTailOncePerAgentState(t *testing.T) {
	tails := &fakeTails{}
	a := member("a", v1alpha1.PhaseReady)
	a.Status.PaneID = "w1:p1"
	e := newEnv(t, &Options{Tails: tails}, a, member("b", v1alpha1.PhaseReady))
	c, _ := e.login()
	resp, ctx := e.events(c, "/ui/events?member=a")
	events := readEvents(resp.Body)
	if first := <-events; !strings.Contains(first, "w1:p1: read 1 of 40 lines") {
		t.Fatalf("first update has no tail:\n%s", first)
	}
	setAgent := func(name, status string) {
		e.fleet.change(func(f *fleet) {
			m := f.members[name]
			m.Status.AgentStatus = status
			f.members[name] = m
		})
	}
	setAgent("b", "working") // another member: nothing to render, nothing to read
	setAgent("a", "working")
	select {
	case next := <-events:
		if !strings.Contains(next, "read 2 of 40") || !strings.Contains(next, `id="agent">working<`) {
			t.Errorf("update after a's agent changed:\n%s", next)
		}
	case <-ctx.Done():
		t.Fatal("no update after a's agent changed")
	}
	if n := tails.count(); n != 2 {
		t.Errorf("%d tail reads, want 2 (one per state of a's agent)", n)
	}
}

// TestEvents_StreamEndsWithItsSession: an open stream does not outlive its
// session: it ends with an "ended" event at logout and at expiry.
func TestEvents_StreamEndsWithItsSession(t *testing.T) {
	tests := map[string]func(e *env, c *http.Client, csrf string){
		"logout": func(e *env, c *http.Client, csrf string) {
			e.post(c, "/ui/logout", nil, map[string]string{"Origin": e.srv.URL, "X-CSRF-Token": csrf})
		},
		"idle": func(e *env, _ *http.Client, _ string) { e.clock.Step(DefaultSessionIdle) },
	}
	for name, end := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil, member("a", v1alpha1.PhaseReady))
			c, csrf := e.login()
			resp, ctx := e.events(c, "/ui/events")
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() && sc.Text() != "" { // the first update
			}
			end(e, c, csrf)
			var rest []string
			for sc.Scan() {
				rest = append(rest, sc.Text())
			}
			if ctx.Err() != nil || !slices.Contains(rest, "event: ended") {
				t.Errorf("after the session ended the stream sent %q and ended: %v; want an ended event, then the end", rest, ctx.Err() == nil)
			}
		})
	}
}

// TestEvents_EndStreamsEndsOpenStreams: at shutdown the open streams end
// (an HTTP server's Shutdown waits for them otherwise), and a stream opened
// later ends at once.
func TestEvents_EndStreamsEndsOpenStreams(t *testing.T) {
	e := newEnv(t, nil, member("a", v1alpha1.PhaseReady))
	c, _ := e.login()
	resp, ctx := e.events(c, "/ui/events")
	first := readEvents(resp.Body)
	<-first
	e.con.EndStreams()
	for range first { // drains until the stream ends
	}
	if ctx.Err() != nil {
		t.Fatal("an open stream did not end after EndStreams")
	}
	resp, ctx = e.events(c, "/ui/events")
	for range readEvents(resp.Body) {
	}
	if ctx.Err() != nil {
		t.Fatal("a stream opened after EndStreams did not end at once")
	}
}

// TestMemberPage_AMemberOnAnotherNodeNamesItsNode: in a fleet on etcd the
// page of a member another node runs shows its status but reads no
// terminal (that node's herdr holds it) and names the node; a member this
// node runs has its tail; an agent blocked on another node is listed under
// Needs you without a screen read.
func TestMemberPage_AMemberOnAnotherNodeNamesItsNode(t *testing.T) {
	tails := &fakeTails{}
	far := member("far", v1alpha1.PhaseReady)
	far.Status.PaneID, far.Status.NodeName, far.Status.AgentStatus = "w9:p9", "b", "blocked"
	near := member("near", v1alpha1.PhaseReady)
	near.Status.PaneID, near.Status.NodeName = "w1:p1", "a"
	e := newEnv(t, &Options{Tails: tails, Node: "a"}, far, near)
	c, _ := e.login()
	if _, page := e.get(c, "/ui/members/far"); !strings.Contains(page, `id="remote"`) || !strings.Contains(page, "runs on node <strong>b</strong>") ||
		strings.Contains(page, `id="tail"`) || !strings.Contains(page, "w9:p9") {
		t.Errorf("far's page: want its pane and the note naming node b, no terminal:\n%s", page)
	}
	if _, page := e.get(c, "/ui/"); !strings.Contains(page, "blocked at a prompt") {
		t.Errorf("overview: want far's blocked agent under Needs you:\n%s", page)
	}
	if n := tails.count(); n != 0 {
		t.Errorf("%d terminal reads for a member on another node, want none", n)
	}
	if _, page := e.get(c, "/ui/members/near"); !strings.Contains(page, "w1:p1: read 1 of 40 lines") || strings.Contains(page, `id="remote"`) {
		t.Errorf("near's page: want its tail:\n%s", page)
	}
}

// TestMemberPage_ShowsTheMembersWorktree: a member on a worktree shows its
// branch, ahead/behind, the uncommitted file count and the last commit's
// subject, escaped; a member without one shows none of it.
func TestMemberPage_ShowsTheMembersWorktree(t *testing.T) {
	on := member("builder", v1alpha1.PhaseReady)
	on.Status.Worktree = &v1alpha1.WorktreeStatus{Path: "/srv/api.worktrees/agents/builder", Branch: "agents/builder",
		Head: "0123456789abcdef0123456789abcdef01234567", Dirty: 2, Ahead: 1, Behind: 3, LastCommit: "fix <script>alert(1)</script> parser"}
	off := member("plain", v1alpha1.PhaseReady)
	e := newEnv(t, nil, on, off)
	c, _ := e.login()
	_, page := e.get(c, "/ui/members/builder")
	for _, want := range []string{
		"<code>/srv/api.worktrees/agents/builder</code>",
		"<code>agents/builder</code> · ahead 1, behind 3 · 2 uncommitted files",
		"<code>0123456789ab</code> fix &lt;script&gt;alert(1)&lt;/script&gt; parser",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("builder's page lacks %q:\n%s", want, page)
		}
	}
	if _, page := e.get(c, "/ui/members/plain"); strings.Contains(page, `id="branch"`) {
		t.Errorf("a member without a worktree shows a branch:\n%s", page)
	}
}

// TestEvents_RenderedOncePerChangeForEveryStream: however many streams
// show the overview, a change is rendered once (one read of the mailbox),
// not once per stream, and every stream gets it.
func TestEvents_RenderedOncePerChangeForEveryStream(t *testing.T) {
	e := newEnv(t, nil, member("a", v1alpha1.PhaseStarting))
	c, _ := e.login()
	const streams = 8
	before := e.fleet.pollCount()
	var all []<-chan string
	for range streams {
		resp, _ := e.events(c, "/ui/events")
		evs := readEvents(resp.Body)
		if first := <-evs; !strings.Contains(first, `phase-starting">Starting<`) {
			t.Fatalf("first update does not show a Starting:\n%s", first)
		}
		all = append(all, evs)
	}
	e.fleet.change(func(f *fleet) {
		m := f.members["a"]
		m.Status.Phase = v1alpha1.PhaseReady
		f.members["a"] = m
	})
	for i, evs := range all {
		if next := <-evs; !strings.Contains(next, `phase-ready">Ready<`) {
			t.Fatalf("stream %d: the update after the change does not show Ready:\n%s", i, next)
		}
	}
	if n := e.fleet.pollCount() - before; n != 2 {
		t.Errorf("%d streams rendered the overview %d times for one change; want 2 (the first state and the change)", streams, n)
	}
}

// TestPages_ShowABoundedPartOfWorkerTextAndLinkTheRest: what the overview
// shows of a worker's text is a few KiB of each (escaped once), however
// long the text; the rest is one click away, served whole as plain text.
func TestPages_ShowABoundedPartOfWorkerTextAndLinkTheRest(t *testing.T) {
	long := "<b>" + strings.Repeat("x", 256<<10) + "</b>"
	e := newEnv(t, nil, member("asker", v1alpha1.PhaseReady))
	for i := range 20 {
		turn := fmt.Sprintf("t-%d", i)
		e.fleet.turns["asker"] = append(e.fleet.turns["asker"], messaging.TurnStatus{ID: turn, Caller: messaging.DefaultPrimaryName, Asking: true, Question: long, CreatedAt: epoch})
		e.fleet.mail = append(e.fleet.mail, messaging.Message{ID: fmt.Sprintf("m-%d", i), From: "asker", Kind: messaging.KindQuestion, Content: long, TurnID: turn, CreatedAt: epoch})
	}
	page, _ := e.con.fragment(context.Background(), "", nil)
	if len(page) > 256<<10 {
		t.Errorf("twenty questions of 256 KiB make an overview of %d bytes, want at most 256 KiB", len(page))
	}
	if !strings.Contains(page, "&lt;b&gt;xxx") || strings.Contains(page, "&amp;lt;") {
		t.Errorf("the overview does not show the text escaped once")
	}
	for _, link := range []string{`href="/ui/questions/t-7"`, `href="/ui/messages/m-7"`} {
		if !strings.Contains(page, link) {
			t.Errorf("the overview has no link %s to the rest of the text", link)
		}
	}
	c, _ := e.login()
	for _, path := range []string{"/ui/questions/t-7", "/ui/messages/m-7"} {
		resp, body := e.get(c, path)
		if resp.StatusCode != http.StatusOK || body != long || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("GET %s: %s, %s, %d bytes; want the whole text as text/plain", path, resp.Status, resp.Header.Get("Content-Type"), len(body))
		}
	}
	for _, path := range []string{"/ui/questions/t-99", "/ui/messages/m-99"} {
		if resp, _ := e.get(c, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
	if resp, _ := e.get(e.browser(), "/ui/messages/m-7"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /ui/messages/m-7 without a session: %s, want a redirect to the login page", resp.Status)
	}
}

// TestEvents_ACraftedReplyCannotCloseTheMemberPage: a worker's reply built
// to forge the "gone" event that makes a member page say "This member is
// gone" and close its stream reaches the page as text inside an update,
// and the stream goes on to the next change.
func TestEvents_ACraftedReplyCannotCloseTheMemberPage(t *testing.T) {
	e := newEnv(t, nil, member("w", v1alpha1.PhaseReady))
	for i, reply := range []string{"done\r\r", "done\r\revent: gone\r\rdata: x\r\r", "done\n\nevent: gone\ndata: x\n\n"} {
		e.fleet.mail = append(e.fleet.mail, messaging.Message{ID: fmt.Sprint("m-", i), From: "w", Kind: messaging.KindReply, Content: reply, CreatedAt: epoch})
	}
	c, _ := e.login()
	resp, _ := e.events(c, "/ui/events?member=w")
	rd := sse.NewReader(resp.Body, 1<<20)
	first, err := rd.Next()
	if err != nil || first.Name != "update" || !strings.Contains(string(first.Data), "event: gone") {
		t.Fatalf("first event %q (%v), want an update showing the replies as text:\n%s", first.Name, err, first.Data)
	}
	e.fleet.change(func(f *fleet) {
		m := f.members["w"]
		m.Status.AgentStatus = "working"
		f.members["w"] = m
	})
	next, err := rd.Next()
	if err != nil || next.Name != "update" || !strings.Contains(string(next.Data), `id="agent">working<`) {
		t.Fatalf("after a change: event %q (%v), want the next update", next.Name, err)
	}
}

// The overview shows the rollouts under way, paused or stopped — the
// profile, its progress and each member it waits for, and why — and none
// once every profile's rollout is complete.
func TestOverview_ShowsRolloutsAndTheirWaits(t *testing.T) {
	progressing := func(reason, msg string) v1alpha1.ProfileStatus {
		return v1alpha1.ProfileStatus{Members: 3, UpdatedMembers: 1, Conditions: []v1alpha1.Condition{
			{Type: v1alpha1.ConditionProgressing, Status: v1alpha1.ConditionTrue, Reason: reason, Message: msg}}}
	}
	profiles := []v1alpha1.Profile{
		{ObjectMeta: v1alpha1.ObjectMeta{Name: "claude"}, Status: progressing(v1alpha1.ReasonRollingOut, "1 of 3 members updated, 1 of them Ready")},
		{ObjectMeta: v1alpha1.ObjectMeta{Name: "codex"}, Status: progressing(v1alpha1.ReasonRolloutComplete, "every member (0) runs revision 2")},
	}
	waiting := member("alpha", v1alpha1.PhaseReady)
	waiting.Status.Conditions = []v1alpha1.Condition{{Type: v1alpha1.ConditionUpToDate, Status: v1alpha1.ConditionFalse, Reason: v1alpha1.ReasonWaitingForIdle,
		Message: "profile/claude's rollout replaces the agent once it is idle — the agent is working <b>"}}
	pending := member("bravo", v1alpha1.PhaseReady)
	pending.Status.Conditions = []v1alpha1.Condition{{Type: v1alpha1.ConditionUpToDate, Status: v1alpha1.ConditionFalse, Reason: v1alpha1.ReasonRolloutPending,
		Message: "it waits for its turn"}}
	e := newEnv(t, &Options{Profiles: func() []v1alpha1.Profile { return profiles }}, waiting, pending, member("charlie", v1alpha1.PhaseReady))

	v := e.con.overview(context.Background(), nil)
	want := []rolloutRow{{Profile: "claude", State: v1alpha1.ReasonRollingOut, Message: "1 of 3 members updated, 1 of them Ready", Members: 3, Updated: 1,
		Waits: []rolloutWait{
			{Member: "alpha", Reason: v1alpha1.ReasonWaitingForIdle, Message: "profile/claude's rollout replaces the agent once it is idle — the agent is working <b>"},
			{Member: "bravo", Reason: v1alpha1.ReasonRolloutPending, Message: "it waits for its turn"},
		}}}
	if diff := cmp.Diff(want, v.Rollouts); diff != "" {
		t.Errorf("rollouts (-want +got):\n%s", diff)
	}
	c, _ := e.login()
	_, page := e.get(c, "/ui/")
	if !strings.Contains(page, `id="rollout-claude"`) || !strings.Contains(page, "the agent is working &lt;b&gt;") || strings.Contains(page, `id="rollout-codex"`) {
		t.Errorf("the overview's rollouts:\n%s", page)
	}

	profiles[0].Status = progressing(v1alpha1.ReasonRolloutComplete, "done")
	if _, page := e.get(c, "/ui/"); strings.Contains(page, `id="rollouts"`) {
		t.Errorf("a Rollouts section with every rollout complete:\n%s", page)
	}
}
