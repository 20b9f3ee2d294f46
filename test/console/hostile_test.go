package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHostileWorkerTextLeavesTheOverviewWhole: worker text built to break
// the live overview's event stream — replies ending in bare CRs, one
// forging the "gone" event, one far longer than a page shows — leaves the
// overview showing every member, another worker's real question and every
// inbox message; the long one is cut with a link to the rest, and no page
// says the member is gone.
func TestHostileWorkerTextLeavesTheOverviewWhole(t *testing.T) {
	ctx := tab(t)
	login(t, ctx)
	name := unique("hostile")
	applyMember(t, name)
	hostile := connectWorker(t, ctx, name)
	replies := []string{"reply\r\r", "done\r\revent: gone\r\rdata: x\r\r", strings.Repeat("long ", 16<<10)}
	for _, text := range replies {
		res, err := hostile.CallTool(ctx, &sdk.CallToolParams{Name: "bridge_reply", Arguments: map[string]any{"content": text}})
		if err != nil || res.IsError {
			t.Fatalf("bridge_reply: %v %+v", err, res)
		}
	}
	asker := connectWorker(t, ctx, "asker")
	question := unique("which branch, really?")
	askCtx, stopAsking := context.WithCancel(ctx)
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		asker.CallTool(askCtx, &sdk.CallToolParams{Name: "bridge_ask", Arguments: map[string]any{"content": question, "timeoutMs": 60000}})
	}()
	defer func() { stopAsking(); <-asked }()

	do(t, ctx, chromedp.Navigate(fleet.info.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#live")))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll("#live li.need-question")].some(n => n.textContent.includes(`+jsString(question)+`))`)); err != nil {
		t.Fatalf("the live overview never showed the other worker's question: %v", err)
	}
	for _, m := range members(t, ctx) {
		if !eval[bool](t, ctx, `document.querySelector("#live #member-`+m.Name+`") !== null`) {
			t.Errorf("the live overview does not show member %s", m.Name)
		}
	}
	mail := `[...document.querySelectorAll("#live .mail")].filter(m => m.querySelector("a").textContent === ` + jsString(name) + `)`
	if n := eval[int](t, ctx, `(`+mail+`).length`); n != len(replies) {
		t.Errorf("the live overview shows %d of the worker's %d replies", n, len(replies))
	}
	if !eval[bool](t, ctx, `(`+mail+`).some(m => m.querySelector("pre").textContent.includes("event: gone"))`) {
		t.Error("the forged event is not shown as the reply's text")
	}
	if !eval[bool](t, ctx, `(`+mail+`).some(m => m.querySelector(".more a[href^='/ui/messages/']") !== null)`) {
		t.Error("the long reply has no link to the rest of it")
	}
	do(t, ctx, chromedp.Navigate(fleet.info.URL+"/ui/members/"+name), chromedp.WaitVisible(chromedp.CSS("#live .mail")))
	if text := eval[string](t, ctx, `document.querySelector("#flash").textContent`); strings.Contains(text, "gone") {
		t.Errorf("the member page says %q", text)
	}
}
