package harness

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/launch"
)

// SessionResumer is implemented by an adapter whose harness can be started
// into one of its own earlier sessions by id.
type SessionResumer interface {
	// ResumeArgs returns the words appended after the profile's and the
	// adapter's args that make the harness reopen session id. id has
	// passed [ResumeArgs]'s checks.
	ResumeArgs(id string) []string
}

// MaxSessionValue bounds the length in bytes of a session value fleetd puts
// into argv. Session ids are UUIDs (36 bytes) for every harness fleetd
// resumes today.
const MaxSessionValue = 256

// ResumeArgs returns the arguments that make harness (a Profile's
// spec.harness) resume session s, or an error wrapping
// [launch.ErrCannotResume] that says why it cannot:
//
//   - the harness has no resume command fleetd knows. Only Claude Code
//     (`--resume ID`) and Codex (`resume ID`) have one. herdr lets an
//     integration register its own resume_argv (pane.report_agent,
//     pane.report_agent_session), but reports it to no client — agent_session
//     in pane and agent info is {source, agent, kind, value} — so a generic
//     harness is never resumed;
//   - s is a transcript path (kind path): both harnesses resume by session id
//     only, and fleetd does not guess an id from a file name;
//   - s belongs to another agent kind than the harness (a profile that moved
//     from claude to codex gets a fresh start);
//   - the value is unsafe in argv: empty, longer than [MaxSessionValue],
//     not UTF-8, starting with '-' (it would be read as an option), or
//     holding a space, control or format character;
//   - the session's source or agent is not text fit for a status: longer
//     than MaxSessionValue, not UTF-8, or holding a control or format
//     character.
func ResumeArgs(harness string, s v1alpha1.AgentSession) ([]string, error) {
	r, ok := For(harness).(SessionResumer)
	if !ok {
		return nil, fmt.Errorf("%w: fleetd knows no resume command for harness %q (herdr does not report an integration's resume_argv to clients)", launch.ErrCannotResume, harness)
	}
	for _, f := range []struct{ name, v string }{{"source", s.Source}, {"agent", s.Agent}} {
		if err := checkText(f.v); err != nil {
			return nil, fmt.Errorf("%w: the session's %s %w", launch.ErrCannotResume, f.name, err)
		}
	}
	if got, want := CanonicalKind(s.Agent), CanonicalKind(harness); got != want {
		return nil, fmt.Errorf("%w: the session belongs to agent kind %q, the profile's harness is %q", launch.ErrCannotResume, s.Agent, harness)
	}
	if s.Kind != v1alpha1.AgentSessionKindID {
		return nil, fmt.Errorf("%w: %s resumes by session id, herdr reported a session of kind %q", launch.ErrCannotResume, CanonicalKind(harness), s.Kind)
	}
	if err := checkSessionValue(s.Value); err != nil {
		return nil, fmt.Errorf("%w: session id %w", launch.ErrCannotResume, err)
	}
	return r.ResumeArgs(s.Value), nil
}

// checkSessionValue refuses a value that could be anything but one plain
// argv word naming a session.
func checkSessionValue(v string) error {
	if v == "" {
		return fmt.Errorf("is empty")
	}
	if err := checkText(v); err != nil {
		return err
	}
	if strings.HasPrefix(v, "-") {
		return fmt.Errorf("%q starts with '-' and would be read as an option", v)
	}
	if i := strings.IndexFunc(v, unicode.IsSpace); i >= 0 {
		return fmt.Errorf("%q holds %U, a space", v, []rune(v[i:])[0])
	}
	return nil
}

// checkText refuses text unfit for argv or a status: longer than
// [MaxSessionValue] bytes, not UTF-8, or holding a control or format
// character.
func checkText(v string) error {
	switch {
	case len(v) > MaxSessionValue:
		return fmt.Errorf("is %d bytes long, more than %d", len(v), MaxSessionValue)
	case !utf8.ValidString(v):
		return fmt.Errorf("%q is not UTF-8", v)
	}
	if i := strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }); i >= 0 {
		return fmt.Errorf("%q holds %U, a control or format character", v, []rune(v[i:])[0])
	}
	return nil
}

// ResumeArgs implements [SessionResumer]: Claude Code reopens a
// conversation with `--resume ID` (the spelling herdr's own session restore
// uses: `claude --resume <id>`).
func (Claude) ResumeArgs(id string) []string { return []string{"--resume", id} }

// ResumeArgs implements [SessionResumer]: Codex reopens a session with its
// `resume ID` subcommand (herdr's restore: `codex resume <id>`). The
// subcommand comes last: the options before it — the profile's args and the
// adapter's -c overrides — are Codex's root options, which `codex resume`
// takes as its own (root -c overrides first, resume's after). A profile
// whose args end in a positional prompt cannot be resumed this way.
func (Codex) ResumeArgs(id string) []string { return []string{"resume", id} }
