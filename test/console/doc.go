// Package console holds the browser tests of fleetd's console (package
// internal/console): a real Chromium, driven with chromedp, against a real
// fleetd (the daemon in process, on the simulated herdr, as `fleetd serve
// --herdr=sim` runs it). One browser serves the whole test binary
// (TestMain); each test opens its own tab in a fresh browser context, so
// cookies never leak from one test to another.
//
// The browser is Debian's /usr/bin/chromium (or $FLEETD_CHROMIUM). Without
// one the tests skip, saying why — except under CI=true, where a missing
// browser fails them: .ci/run installs it.
//
// FLEETD_SCREENSHOTS=DIR makes TestScreenshots write the console's
// screenshots into DIR (docs/ holds the committed ones):
//
//	FLEETD_SCREENSHOTS=$PWD/docs go test -run TestScreenshots ./test/console/
package console
