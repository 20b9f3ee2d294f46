package printers

import (
	"strings"
	"testing"
)

func TestSortBy(t *testing.T) {
	type item struct {
		Name string         `json:"name"`
		N    any            `json:"n,omitempty"`
		T    string         `json:"t,omitempty"`
		M    map[string]any `json:"m,omitempty"`
	}
	items := []item{
		{Name: "ten", N: 10, T: "2026-12-01T10:00:05Z"},
		{Name: "two", N: 2, T: "2026-12-01T10:00:05.5Z"},
		{Name: "none"},
		{Name: "one", N: 1, T: "2026-12-01T09:00:00Z"},
	}
	names := func() string {
		var s []string
		for _, it := range items {
			s = append(s, it.Name)
		}
		return strings.Join(s, " ")
	}
	for expr, want := range map[string]string{
		".n":    "none one two ten", // by value, not as text ("10" < "2")
		"{.t}":  "none one ten two", // by time: .5 s after ten's
		".name": "none one ten two",
	} {
		if err := SortBy(items, expr); err != nil {
			t.Fatal(err)
		}
		if got := names(); got != want {
			t.Errorf("--sort-by %s: %s, want %s", expr, got, want)
		}
	}
	if err := SortBy(items, ".items[?(@.x)]"); err == nil {
		t.Error("--sort-by with a filter: no error")
	}
	if err := CheckSortBy("..x"); err == nil || !strings.Contains(err.Error(), `--sort-by "..x": path "..x": recursive descent`) {
		t.Errorf("CheckSortBy(..x) = %v", err)
	}
}
