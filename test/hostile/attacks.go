package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/internal/sse"
)

// slowBodies keeps n connections that announce a 200 KB body and send two
// bytes of it (with token, if any, to POST /mcp; without, to POST
// /members), renewing each as soon as fleetd closes it.
func slowBodies(ctx context.Context, f *fleetd, n int, token string) string {
	var closed atomic.Int64
	var wg sync.WaitGroup
	path, auth := "/members", ""
	if token != "" {
		path, auth = "/mcp", "Authorization: Bearer "+token+"\r\n"
	}
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", f.addr())
				if err != nil {
					continue
				}
				stop := context.AfterFunc(ctx, func() { c.Close() })
				fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 200000\r\n\r\n{\"", path, f.addr(), auth)
				io.Copy(io.Discard, c) // until fleetd closes it
				stop()
				c.Close()
				if ctx.Err() == nil {
					closed.Add(1)
					time.Sleep(10 * time.Millisecond) // an attacker's loop, not a wait for fleetd
				}
			}
		})
	}
	wg.Wait()
	return fmt.Sprintf("%d slow bodies; fleetd closed %d of them (each renewed at once)", n, closed.Load())
}

// heldWaits keeps n GET /inbox?wait=true of one worker token in flight,
// each sent again at once when it is answered.
func heldWaits(ctx context.Context, f *fleetd, n int) string {
	var refused, failed atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/inbox?wait=true&timeoutMs=600000", nil)
				req.Header.Set("Authorization", "Bearer "+f.workers[0])
				resp, err := client.Do(req)
				switch {
				case ctx.Err() != nil:
				case err != nil:
					failed.Add(1)
				default:
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						refused.Add(1)
					}
				}
				if ctx.Err() == nil {
					time.Sleep(20 * time.Millisecond) // an attacker's loop, not a wait for fleetd
				}
			}
		})
	}
	wg.Wait()
	return fmt.Sprintf("%d waits from one worker: %d refused with 429, %d closed before an answer", n, refused.Load(), failed.Load())
}

// reply sends bridge_reply texts as worker token (each a reply nobody
// waits for: it lands in the primary's mailbox).
func reply(ctx context.Context, f *fleetd, token string, texts ...string) error {
	cs, err := f.mcpSession(ctx, token)
	if err != nil {
		return err
	}
	defer cs.Close()
	for _, t := range texts {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "bridge_reply", Arguments: map[string]any{"content": t}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("bridge_reply: %v", res.StructuredContent)
		}
	}
	return nil
}

// console logs in to the console as `fleetd ui` does and returns a client
// with the session's cookie.
func (f *fleetd) console(ctx context.Context) (*http.Client, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/ui/codes", nil)
	req.Header.Set("Authorization", "Bearer "+f.primary)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	var code struct{ Path string }
	err = jsonDecode(resp.Body, &code)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err = c.Get(f.url + code.Path); err != nil {
		return nil, err
	}
	resp.Body.Close()
	return c, nil
}

// sseInjection sends worker replies built to break the console's event
// stream and reads the live overview as a browser does.
func sseInjection(ctx context.Context, f *fleetd) string {
	replies := []string{"reply\r\r", "done\r\revent: gone\r\rdata: x\r\r"}
	if err := reply(ctx, f, f.workers[0], replies...); err != nil {
		return "bridge_reply: " + err.Error()
	}
	c, err := f.console(ctx)
	if err != nil {
		return "console: " + err.Error()
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, "GET", f.url+"/ui/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		return "events: " + err.Error()
	}
	defer resp.Body.Close()
	rd := sse.NewReader(resp.Body, 16<<20)
	var names []string
	first := ""
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		names = append(names, cmpOr(ev.Name, "message"))
		if first == "" && ev.Name == "update" {
			first = string(ev.Data)
		}
	}
	rows := 0
	for _, n := range f.names {
		if strings.Contains(first, `id="member-`+n+`"`) {
			rows++
		}
	}
	return fmt.Sprintf("events %v; the first update shows %d of %d members and %d of %d replies",
		names, rows, len(f.names), strings.Count(first, `class="mail `), len(replies))
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// consoleAmplification: 1.25 MB of replies from one worker, the overview's
// size, and 32 console streams with 2 KiB receive buffers that nobody
// reads while the worker keeps adding small notes (each a change every
// stream renders).
func consoleAmplification(ctx context.Context, f *fleetd) string {
	big := strings.Repeat("<b>", 256<<10/3)
	if err := reply(ctx, f, f.workers[0], big, big, big, big, big); err != nil {
		return "bridge_reply: " + err.Error()
	}
	c, err := f.console(ctx)
	if err != nil {
		return "console: " + err.Error()
	}
	resp, err := c.Get(f.url + "/ui/")
	if err != nil {
		return "overview: " + err.Error()
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	u, _ := http.NewRequest("GET", f.url+"/ui/", nil)
	cookie := ""
	for _, ck := range c.Jar.Cookies(u.URL) {
		cookie = ck.Name + "=" + ck.Value
	}
	var streams []net.Conn
	for range 32 {
		conn, err := smallReceiveBuffer.DialContext(ctx, "tcp", f.addr())
		if err != nil {
			continue
		}
		fmt.Fprintf(conn, "GET /ui/events HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\nAccept: text/event-stream\r\n\r\n", f.addr(), cookie)
		streams = append(streams, conn)
	}
	defer func() {
		for _, s := range streams {
			s.Close()
		}
	}()
	cs, err := f.mcpSession(ctx, f.workers[1])
	if err != nil {
		return "session: " + err.Error()
	}
	defer cs.Close()
	notes := 0
	for ctx.Err() == nil {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "bridge_reply", Arguments: map[string]any{"content": fmt.Sprint("note ", notes), "final": false}}); err == nil {
			notes++
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Sprintf("overview page %d KiB; 32 unread streams while %d notes changed the fleet", len(page)>>10, notes)
}

// logFollows: one worker follows its own terminal 32 times; then the
// primary follows one.
func logFollows(ctx context.Context, f *fleetd) string {
	follow := func(token, member string) (int, io.Closer) {
		req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/members/"+member+"/logs?follow=1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			return 0, io.NopCloser(nil)
		}
		go io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Body
	}
	codes := map[int]int{}
	var open []io.Closer
	for range 32 {
		code, body := follow(f.workers[0], f.names[0])
		codes[code]++
		open = append(open, body)
	}
	primary, body := follow(f.primary, f.names[1])
	open = append(open, body)
	<-ctx.Done()
	for _, b := range open {
		b.Close()
	}
	return fmt.Sprintf("the worker's 32 follows: %v; the primary's follow: %d", codes, primary)
}

// bigAnnotation writes a member with a 1.5 MB annotation into the
// manifests directory and reads the member watch with `fleetd get -w`'s
// 4 MiB bound per event.
func bigAnnotation(ctx context.Context, f *fleetd) string {
	manifest := "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata:\n  name: big\n  annotations:\n    note: \"" + strings.Repeat("<", 1500<<10) + "\"\nspec: {profile: sim}\n"
	if err := os.WriteFile(filepath.Join(f.manifests, "big.yaml"), []byte(manifest), 0o644); err != nil {
		return err.Error()
	}
	accepted := false
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for actx.Err() == nil && !accepted {
		members, _ := f.members(actx)
		for _, m := range members {
			accepted = accepted || m.Name == "big"
		}
		if !accepted {
			select {
			case <-actx.Done():
			case <-time.After(200 * time.Millisecond): // the store reads the directory on its own schedule
			}
		}
	}
	wctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	req, _ := http.NewRequestWithContext(wctx, "GET", f.url+"/members?watch=1", nil)
	req.Header.Set("Authorization", "Bearer "+f.primary)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "watch: " + err.Error()
	}
	defer resp.Body.Close()
	rd := sse.NewReader(bufio.NewReader(resp.Body), 4<<20)
	events, watched := 0, "the watch read every member"
	for {
		ev, err := rd.Next()
		if err != nil {
			watched = "the watch failed: " + err.Error()
			break
		}
		events++
		if ev.Name == "SYNCED" {
			break
		}
	}
	return fmt.Sprintf("member with a 1.5 MB annotation accepted: %v; %s (%d events)", accepted, watched, events)
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
