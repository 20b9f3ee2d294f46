package printers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/internal/cli/jsonpath"
)

// CheckSortBy reports whether expr is a --sort-by SortBy takes.
func CheckSortBy(expr string) error {
	return SortBy([]any{}, expr)
}

// SortBy orders items by the value a JSONPath expression (".status.restarts"
// or "{.metadata.creationTimestamp}") finds in each: numbers by value,
// everything else by its text; an item without the field sorts first.
// The sort is stable, so items with the same value keep their name order.
// An empty expr leaves items as they are.
func SortBy[T any](items []T, expr string) error {
	if expr == "" {
		return nil
	}
	e := strings.TrimSpace(expr)
	if strings.HasPrefix(e, "{") && strings.HasSuffix(e, "}") {
		e = e[1 : len(e)-1]
	}
	path, err := jsonpath.ParsePath(e)
	if err != nil {
		return fmt.Errorf("--sort-by %q: %w", expr, err)
	}
	keys := make([]any, len(items))
	for i, it := range items {
		g, err := generic(it)
		if err != nil {
			return err
		}
		if vs := path.Find(g); len(vs) > 0 {
			keys[i] = vs[0]
		}
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return lessValue(keys[idx[a]], keys[idx[b]]) })
	sorted := make([]T, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

func lessValue(a, b any) bool {
	switch {
	case a == nil:
		return b != nil
	case b == nil:
		return false
	}
	fa, aNum := a.(float64)
	fb, bNum := b.(float64)
	if aNum && bNum {
		return fa < fb
	}
	sa, sb := jsonpath.ValueString(a), jsonpath.ValueString(b)
	// Timestamps sort by time: RFC 3339 text with a fraction of a second
	// does not sort as text ("05.5Z" < "05Z").
	if ta, err := time.Parse(time.RFC3339Nano, sa); err == nil {
		if tb, err := time.Parse(time.RFC3339Nano, sb); err == nil {
			return ta.Before(tb)
		}
	}
	return sa < sb
}
