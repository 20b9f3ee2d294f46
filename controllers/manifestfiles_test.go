package controllers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// A member's file replaced by something the watcher will not read (a
// directory named like it, a link to /dev/zero) leaves the member running
// on its last good definition, with the reason on its status.
func TestManager_UnreadableManifestFileReachesStatus(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"a directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "alpha.yaml: not a regular file but a directory; skipped"},
		{"a link to /dev/zero", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}, "alpha.yaml: a symbolic link to /dev/zero, which is a character device, not a regular file; skipped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
				e.start()
				pane := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status.PaneID
				path := filepath.Join(e.dir, "alpha.yaml")
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				tt.make(t, path)
				e.changedDir()
				ms := e.waitFor("the skipped file on alpha's status", func(ms map[string]v1alpha1.Member) bool {
					return condition(ms["alpha"], v1alpha1.ConditionManifestValid).Status == v1alpha1.ConditionFalse
				})
				if c := condition(ms["alpha"], v1alpha1.ConditionManifestValid); c.Reason != v1alpha1.ReasonManifestError || !strings.Contains(c.Message, tt.want) {
					t.Errorf("ManifestValid %+v; want reason %s and a message containing %q", c, v1alpha1.ReasonManifestError, tt.want)
				}
				if ms["alpha"].Status.PaneID != pane || !e.paneAlive(pane) {
					t.Errorf("member disturbed: %+v", ms["alpha"].Status)
				}
			})
		})
	}
}
