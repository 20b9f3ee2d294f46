package daemon

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestMemberWrites_ConcurrentCreateAndDeleteOfOneMember races creates and
// deletes of one member over REST and MCP: every answer is a success, a
// not-found or a conflict (200/201, 404, 409; the tools' not_found and
// conflict), never an internal error or an unavailable store.
func TestMemberWrites_ConcurrentCreateAndDeleteOfOneMember(t *testing.T) {
	t.Parallel()
	// The race needs more calls than one token's rate limit allows (it is
	// tested on its own); a negative rate turns it off.
	f := startFleetConfig(t, "", Config{ToolCallRate: -1})
	const name, rounds = "racer", 12
	body := `{"profile":"claude","name":"` + name + `"}`
	url := f.info.URL + "/members"

	var mu sync.Mutex
	var bad []string
	record := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		bad = append(bad, fmt.Sprintf(format, args...))
	}
	rest := func(method, url, body string, ok ...int) {
		req, _ := http.NewRequestWithContext(f.ctx, method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			record("%s %s: %v", method, url, err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, code := range ok {
			if resp.StatusCode == code {
				return
			}
		}
		record("%s %s = %d %s", method, url, resp.StatusCode, b)
	}
	tool := func(name string, args map[string]any, okCodes ...string) {
		_, terr := call[map[string]any](f.ctx, f.primary, name, args)
		if terr == nil {
			return
		}
		for _, c := range okCodes {
			if terr.Code == c {
				return
			}
		}
		record("%s %v = %s: %s", name, args, terr.Code, terr.Message)
	}

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range rounds {
				rest("POST", url, body, http.StatusOK, http.StatusCreated, http.StatusConflict)
			}
		})
		wg.Go(func() {
			for range rounds {
				rest("DELETE", url+"/"+name, "", http.StatusOK, http.StatusNotFound, http.StatusConflict)
			}
		})
		wg.Go(func() {
			for range rounds {
				tool("bridge_spawn", map[string]any{"profile": "claude", "name": name, "wait": false}, "conflict")
			}
		})
		wg.Go(func() {
			for range rounds {
				tool("bridge_stop", map[string]any{"paneId": name}, "conflict", "not_found")
			}
		})
		// Waiting for Ready while the member is deleted under the call.
		wg.Go(func() {
			for range rounds / 2 {
				tool("bridge_spawn", map[string]any{"profile": "claude", "name": name}, "conflict")
				rest("POST", url+"?wait=true", body, http.StatusOK, http.StatusCreated, http.StatusConflict)
			}
		})
	}
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
}
