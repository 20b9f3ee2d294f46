package console_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPhoneWidth_PagesDoNotScrollSideways: at a phone's width (390 px)
// the overview and a member page fit; only wide tables scroll in their own
// box.
func TestPhoneWidth_PagesDoNotScrollSideways(t *testing.T) {
	ctx := tab(t)
	login(t, ctx)
	for _, path := range []string{"/ui/", "/ui/members/alpha", "/ui/apply"} {
		do(t, ctx, chromedp.EmulateViewport(390, 800, chromedp.EmulateMobile), chromedp.Navigate(fleet.info.URL+path), chromedp.WaitVisible(chromedp.CSS("main")))
		if over := eval[int](t, ctx, "document.documentElement.scrollWidth - document.documentElement.clientWidth"); over > 0 {
			t.Errorf("%s at 390 px is %d px wider than the screen", path, over)
		}
	}
}
