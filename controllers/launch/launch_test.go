package launch_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/controllers/launch"
)

// A Spec's environment holds secrets (the pane's token, tenant
// credentials): printing or logging a Spec shows its keys, never a value.
func TestSpec_PrintsNoEnvironmentValue(t *testing.T) {
	const secret = "fltd_s3cr3t"
	spec := launch.Spec{Args: []string{"--model", "opus"}, Env: map[string]string{"FLEETD_TOKEN": secret}, Token: "tok-1"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("launch", "spec", spec)
	for name, out := range map[string]string{
		"String": spec.String(), "%v": fmt.Sprintf("%v", spec), "%+v": fmt.Sprintf("%+v", spec), "slog": logged.String(),
	} {
		if strings.Contains(out, secret) {
			t.Errorf("%s shows the secret: %s", name, out)
		}
		if !strings.Contains(out, "FLEETD_TOKEN") || !strings.Contains(out, "tok-1") {
			t.Errorf("%s lacks the env keys or the token handle: %s", name, out)
		}
	}
}
