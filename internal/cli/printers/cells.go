package printers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// cells joins a table row for a tabwriter, each cell made safe for a
// terminal on one line (package termtext): names, statuses and ids come from
// manifests, herdr and the agents' own reports, and a tab or newline in one
// would also break the table.
func cells(row []string) string {
	for i, c := range row {
		row[i] = termtext.Line(c)
	}
	return strings.Join(row, "\t")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age renders how long ago t was the way kubectl does: 45s, 12m, 5h, 3d.
func age(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return humanDuration(now.Sub(*t))
}

func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// mapString prints labels and the like as k=v,k2=v2 by key, or <none>.
func mapString(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// targetString is a member's gateway: resident, or tenant/ID.
func targetString(t *v1alpha1.MCPTarget) string {
	switch {
	case t == nil:
		return v1alpha1.TargetResident
	case t.Kind == v1alpha1.TargetTenant:
		return t.Kind + "/" + t.TenantID
	default:
		return dash(t.Kind)
	}
}

// branch is a member's BRANCH: the branch its worktree has checked out, or
// before fleetd read it, the one its spec.worktree names; "" for a member
// without a worktree (or one its profile gives, until it is read).
func branch(m *v1alpha1.Member) string {
	if w := m.Status.Worktree; w != nil && w.Branch != "" {
		return w.Branch
	}
	if w := m.Spec.Worktree; w != nil {
		return w.Branch
	}
	return ""
}
