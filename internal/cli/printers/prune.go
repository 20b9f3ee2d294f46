package printers

import (
	"fmt"
	"io"
	"time"

	"github.com/fleetd-dev/fleetd/mcp"
)

// PrintPruneHold prints the members whose prune fleetd holds (`fleetd
// prune`): a table of MEMBER, HELD (how long), PRUNED IN (how long until
// the hold ends by itself) and SOURCE (where its definition was); -o wide
// adds the message, which says what happened; -o json and yaml print the
// list as it came.
func PrintPruneHold(w io.Writer, list mcp.PruneHoldList, f Format, now time.Time) error {
	if f.structured() {
		return f.writeStructured(w, list)
	}
	if len(list.Items) == 0 {
		_, err := fmt.Fprintln(w, "No prune is held.")
		return err
	}
	tw := newTabwriter(w, 3)
	header := []string{"MEMBER", "HELD", "PRUNED IN", "SOURCE"}
	if f.wide() {
		header = append(header, "MESSAGE")
	}
	fmt.Fprintln(tw, cells(header))
	for _, h := range list.Items {
		row := []string{h.Member, humanDuration(now.Sub(h.Since)), humanDuration(h.Until.Sub(now)), dash(h.Source)}
		if f.wide() {
			row = append(row, h.Message)
		}
		fmt.Fprintln(tw, cells(row))
	}
	return tw.Flush()
}
