package console

import (
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// lineDiff is a line diff of a and b, as `fleetd diff` computes it
// (go-difflib's matcher): kept lines with "  ", removed lines with "- ",
// added with "+ ". "" when a and b are equal.
func lineDiff(a, b string) string {
	if a == b {
		return ""
	}
	x, y := splitLines(a), splitLines(b)
	var out strings.Builder
	write := func(prefix string, lines []string) {
		for _, l := range lines {
			out.WriteString(prefix + l + "\n")
		}
	}
	for _, op := range difflib.NewMatcher(x, y).GetOpCodes() {
		switch op.Tag {
		case 'e':
			write("  ", x[op.I1:op.I2])
		case 'd':
			write("- ", x[op.I1:op.I2])
		case 'i':
			write("+ ", y[op.J1:op.J2])
		case 'r':
			write("- ", x[op.I1:op.I2])
			write("+ ", y[op.J1:op.J2])
		}
	}
	return out.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
