package printers

import (
	"fmt"
	"io"

	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// PrintLines prints lines of a terminal someone else wrote (`fleetd
// logs`), each made safe for a terminal.
func PrintLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, termtext.Text(l))
	}
}
