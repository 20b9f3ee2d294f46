package console

import "strings"

// maxDiffLines bounds the inputs of lineDiff; longer ones are compared as
// a whole (every old line removed, every new one added). A Member's YAML is
// a few dozen lines.
const maxDiffLines = 2000

// lineDiff is a line diff of a and b: every line of the longest common
// subsequence kept with "  ", removed lines with "- ", added with "+ ".
// "" when a and b are equal.
func lineDiff(a, b string) string {
	if a == b {
		return ""
	}
	x, y := splitLines(a), splitLines(b)
	var out strings.Builder
	if len(x) > maxDiffLines || len(y) > maxDiffLines {
		for _, l := range x {
			out.WriteString("- " + l + "\n")
		}
		for _, l := range y {
			out.WriteString("+ " + l + "\n")
		}
		return out.String()
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
	return out.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
