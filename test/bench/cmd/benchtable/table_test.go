package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseBench_PairsFiguresWithBaselines(t *testing.T) {
	in := `goos: linux
BenchmarkConvergence/members=100-2   1   782569509 ns/op   3.010 base-calls/member   241.3 base-wall-ms   3.070 calls/member   474.2 wall-ms   1.000 calls:tab.create/member
BenchmarkIdleResync-2   1   1270923430 ns/op   4.000 calls/interval   4.000 base-calls/interval
--- FAIL: BenchmarkBroken
PASS
`
	got, err := parseBench(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{Bench: "Convergence/members=100", Figure: "wall-ms", Value: 474.2, Base: 241.3, HasBase: true},
		{Bench: "Convergence/members=100", Figure: "calls/member", Value: 3.07, Base: 3.01, HasBase: true},
		{Bench: "Convergence/members=100", Figure: "calls:tab.create/member", Value: 1},
		{Bench: "IdleResync", Figure: "calls/interval", Value: 4, Base: 4, HasBase: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

func TestWriteTable_RatioOnlyWithNonZeroBaseline(t *testing.T) {
	var b strings.Builder
	writeTable(&b, []row{
		{Bench: "X", Figure: "wall-ms", Value: 474.2, Base: 241.3, HasBase: true},
		{Bench: "X", Figure: "errors", Value: 0, Base: 0, HasBase: true},
		{Bench: "X", Figure: "goroutines", Value: 12},
	})
	want := `| benchmark | figure | fleetd | baseline | ratio |
|---|---|--:|--:|--:|
| X | wall-ms | 474 | 241 | 1.97× |
| X | errors | 0 | 0 |  |
| X | goroutines | 12.0 |  |  |
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

func TestParseBench_RejectsUnparsableValue(t *testing.T) {
	_, err := parseBench(strings.NewReader("BenchmarkX-2 1 12 ns/op abc wall-ms\n"))
	if err == nil || !strings.Contains(err.Error(), `"abc"`) {
		t.Fatalf("err = %v, want one naming the bad value", err)
	}
}
