package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// row is one figure: a benchmark's metric and, when it reported one, the
// baseline of the same unit.
type row struct {
	Bench, Figure string
	Value, Base   float64
	HasBase       bool
}

// builtinUnits are go test's own columns, not figures.
var builtinUnits = map[string]bool{"ns/op": true, "B/op": true, "allocs/op": true, "MB/s": true}

// procSuffix is the -GOMAXPROCS suffix go test appends to benchmark names.
var procSuffix = regexp.MustCompile(`-\d+$`)

// parseBench reads `go test -bench` output and returns its figures, each
// benchmark's headline figures first. Lines that are not benchmark results
// are ignored.
func parseBench(r io.Reader) ([]row, error) {
	var rows []row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		values := map[string]float64{}
		var units []string
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark %s: value %q of %s: %w", name, f[i], f[i+1], err)
			}
			values[f[i+1]] = v
			units = append(units, f[i+1])
		}
		var bench []row
		for _, u := range units {
			if builtinUnits[u] || strings.HasPrefix(u, "base-") {
				continue
			}
			b, ok := values["base-"+u]
			bench = append(bench, row{Bench: name, Figure: u, Value: values[u], Base: b, HasBase: ok})
		}
		sort.SliceStable(bench, func(i, j int) bool { return less(bench[i].Figure, bench[j].Figure) })
		rows = append(rows, bench...)
	}
	return rows, sc.Err()
}

// headline figures come first, in this order; the rest alphabetically.
var headline = []string{"wall-ms", "cpu-ms", "p50-ms", "p99-ms", "ready-ms", "all-ms", "errors", "calls/interval", "calls/member", "calls/op"}

func less(a, b string) bool {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra < rb
	}
	return a < b
}

func rank(u string) int {
	for i, h := range headline {
		if u == h {
			return i
		}
	}
	return len(headline)
}

// writeTable prints rows as a Markdown table.
func writeTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| benchmark | figure | fleetd | baseline | ratio |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|")
	for _, r := range rows {
		base, ratio := "", ""
		if r.HasBase {
			base = num(r.Base)
			if r.Base != 0 {
				ratio = strconv.FormatFloat(r.Value/r.Base, 'f', 2, 64) + "×"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.Bench, r.Figure, num(r.Value), base, ratio)
	}
}

// num formats a figure with three significant digits, without exponent for
// the magnitudes benchmarks produce.
func num(v float64) string {
	switch a := abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
