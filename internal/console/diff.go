package console

import "strings"

// maxDiffLines bounds the lines lineDiff compares line by line once the
// lines both inputs begin and end with are set aside; longer middles are
// compared as a whole (every old line removed, every new one added). A
// Member's YAML is a few dozen lines, and an edit touches a few of them.
const maxDiffLines = 2000

// lineDiff is a line diff of a and b: every line of the longest common
// subsequence kept with "  ", removed lines with "- ", added with "+ ".
// "" when a and b are equal. The common first and last lines are kept as
// they are, so the quadratic table covers only the changed middle.
func lineDiff(a, b string) string {
	if a == b {
		return ""
	}
	x, y := splitLines(a), splitLines(b)
	head := 0
	for head < len(x) && head < len(y) && x[head] == y[head] {
		head++
	}
	tail := 0
	for tail < len(x)-head && tail < len(y)-head && x[len(x)-1-tail] == y[len(y)-1-tail] {
		tail++
	}
	var out strings.Builder
	for _, l := range x[:head] {
		out.WriteString("  " + l + "\n")
	}
	middle(&out, x[head:len(x)-tail], y[head:len(y)-tail])
	for _, l := range x[len(x)-tail:] {
		out.WriteString("  " + l + "\n")
	}
	return out.String()
}

// middle writes the line diff of x and y, which neither begin nor end with
// the same line.
func middle(out *strings.Builder, x, y []string) {
	if len(x) > maxDiffLines || len(y) > maxDiffLines {
		for _, l := range x {
			out.WriteString("- " + l + "\n")
		}
		for _, l := range y {
			out.WriteString("+ " + l + "\n")
		}
		return
	}
	// lcs[i][j] is the common subsequence's length of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out.WriteString("  " + x[i] + "\n")
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+ " + y[j] + "\n")
			j++
		default:
			out.WriteString("- " + x[i] + "\n")
			i++
		}
	}
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
