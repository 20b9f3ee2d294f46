package printers

import (
	"fmt"
	"io"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// `fleetd rollout`'s output, kubectl rollout's: status lines ("Waiting for
// profile "codex" rollout to finish: …", "… successfully rolled out"),
// the history table (REVISION, CHANGE-CAUSE) and one revision's spec.

// RolloutRef names a rollout's object as kubectl does: kind/name, the kind
// in lower case (profile/codex).
func RolloutRef(v mcp.RolloutView) string { return strings.ToLower(v.Kind) + "/" + v.Name }

// RolloutStatus is the line `fleetd rollout status` prints for v, and
// whether the rollout is done (complete) or failed; a failed rollout's
// line is the error's text, without "error: ".
func RolloutStatus(v mcp.RolloutView) (line string, done, failed bool) {
	what := fmt.Sprintf("%s %q", strings.ToLower(v.Kind), v.Name)
	switch v.State {
	case mcp.RolloutComplete:
		return what + " successfully rolled out", true, false
	case mcp.RolloutFailed:
		return termtext.Line(fmt.Sprintf("%s rollout failed: %s", what, v.Message)), false, true
	}
	progress := fmt.Sprintf("%d of %d members updated", v.Updated, v.Members)
	if v.Updated == v.Members {
		progress = fmt.Sprintf("%d of %d updated members are Ready", v.Ready, v.Updated)
	}
	waits := waitsText(v.Waits)
	switch {
	case v.Kind == v1alpha1.KindMember && waits != "":
		progress = waits
	case v.Kind == v1alpha1.KindMember:
		progress = "it waits for its turn in its profile's rollout"
	case waits != "":
		progress += "; " + waits
	}
	if v.State == mcp.RolloutPaused {
		progress += fmt.Sprintf(" (paused: `fleetd rollout resume %s` goes on)", pausedRef(v))
	}
	return termtext.Line(fmt.Sprintf("Waiting for %s rollout to finish: %s...", what, progress)), false, false
}

// pausedRef is the object whose rollout `resume` goes on with: the
// profile itself, or a member's profile.
func pausedRef(v mcp.RolloutView) string {
	if v.Member != nil {
		return "profile/" + v.Member.Spec.Profile
	}
	return RolloutRef(v)
}

// waitsText says what the members being replaced wait for: "alpha waits
// for its agent to be idle (the agent is working), bravo's new agent is
// starting". Members that only wait for their turn are left out.
func waitsText(waits []mcp.RolloutWait) string {
	var parts []string
	for _, w := range waits {
		switch w.Reason {
		case v1alpha1.ReasonRolloutPending, v1alpha1.ReasonRolloutPaused, v1alpha1.ReasonRolloutFailed:
		case v1alpha1.ReasonWaitingForIdle:
			why := w.Message
			if _, after, ok := strings.Cut(why, " once it is idle — "); ok {
				why, _, _ = strings.Cut(after, " — ")
			}
			parts = append(parts, fmt.Sprintf("%s waits for its agent to be idle (%s)", w.Member, why))
		case v1alpha1.ReasonTerminating:
			parts = append(parts, w.Member+"'s old agent is closing")
		case v1alpha1.ReasonStarting:
			parts = append(parts, w.Member+"'s new agent is starting")
		case v1alpha1.ReasonAwaitingInput:
			parts = append(parts, w.Member+"'s new agent waits at a dialog for a person (answer it in herdr)")
		default:
			parts = append(parts, fmt.Sprintf("%s is not Ready (%s)", w.Member, w.Reason))
		}
	}
	return strings.Join(parts, ", ")
}

// RolloutHistory prints kubectl's history table: the object, then each
// revision kept with its change cause, oldest first.
func RolloutHistory(w io.Writer, v mcp.RolloutView) error {
	tw := newTabwriter(w, 2)
	fmt.Fprintln(tw, termtext.Line(RolloutRef(v)))
	fmt.Fprintln(tw, "REVISION\tCHANGE-CAUSE")
	for _, r := range v.Revisions {
		fmt.Fprintf(tw, "%d\t%s\n", r.Revision, termtext.Line(cmpNone(r.ChangeCause)))
	}
	return tw.Flush()
}

// RolloutRevision prints one revision: which, when, why, and its spec as
// YAML.
func RolloutRevision(w io.Writer, rv mcp.RevisionView, now time.Time) error {
	spec, err := yaml.JSONToYAML(rv.Spec)
	if err != nil {
		return fmt.Errorf("revision %d: %w", rv.Revision, err)
	}
	t := rv.Time
	fmt.Fprintf(w, "%s/%s with revision #%d\n", strings.ToLower(rv.Kind), termtext.Line(rv.Name), rv.Revision)
	fmt.Fprintf(w, "Recorded:      %s (%s ago)\n", t.UTC().Format(time.RFC3339), age(&t, now))
	fmt.Fprintf(w, "Change cause:  %s\n", termtext.Line(cmpNone(rv.ChangeCause)))
	fmt.Fprintln(w, "Spec:")
	for _, l := range strings.Split(strings.TrimRight(string(spec), "\n"), "\n") {
		fmt.Fprintln(w, "  "+termtext.Line(l))
	}
	return nil
}

func cmpNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
