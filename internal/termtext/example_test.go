package termtext_test

import (
	"fmt"

	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// A worker's reply that tries to write the clipboard (OSC 52), end herdr's
// bracketed paste, press Enter and ^C: the sequences go, the controls show.
func Example() {
	reply := "done\x1b]52;c;cm0gLXJmIH4=\x07\x1b[201~\r\x03\x1b[1;31mfailed\x1b[0m"
	fmt.Printf("%q\n", termtext.Text(reply))
	fmt.Printf("%q\n", termtext.Line(reply))
	// Output:
	// "done\n\\x03failed"
	// "done\\r\\x03failed"
}
