package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The demo starts etcd and two nodes, places the example members on both
// (by name, by selector, spread), shows each Ready with its node's status
// and the one no node can take as Pending, sends through one node to a
// member on the other and gets its reply, then stops everything.
func TestRun_PlacesMembersOnBothNodes(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fleetd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fleetd-dev/fleetd/cmd/fleetd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	dir := t.TempDir()
	err := run(ctx, options{fleetd: bin, dir: dir, profiles: "../../manifests/profiles.yaml", members: "../../manifests/cluster", once: true}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		`(?m)^profile/claude created\nprofile/codex created\nmember/reviewer created\n`, // the Profiles through fleetd apply, before the Members
		`(?m)^buildbox\s+Ready\s+gpu=a100\s+2\s`,
		`(?m)^laptop\s+Ready\s+kind=laptop\s+2\s`,
		`(?m)^reviewer\s+Ready\s.*\slaptop\s`,
		`(?m)^trainer\s+Ready\s+idle\s+w\d+:p\d+\s.*\sbuildbox\s`, // buildbox's status, as laptop shows it
		`(?m)^tpu-job\s+Pending\s.*\s-\s+codex\s`,
		`(?m)^echo: hello from laptop$`, // the send through laptop to trainer on buildbox
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("output has no line matching %s:\n%s", want, text)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("state under %s: %v, want etcd, laptop and buildbox", dir, entries)
	}
	// One primary token: laptop's, copied to buildbox.
	laptop, err := os.ReadFile(filepath.Join(dir, "laptop", "primary.token"))
	if err != nil {
		t.Fatal(err)
	}
	if buildbox, err := os.ReadFile(filepath.Join(dir, "buildbox", "primary.token")); err != nil || string(buildbox) != string(laptop) {
		t.Errorf("buildbox's primary.token is not laptop's (%v)", err)
	}
}
