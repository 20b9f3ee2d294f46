// Command fleetd runs and manages a fleet of coding agents inside herdr.
package main

import (
	"fmt"
	"os"

	"github.com/fleetd-dev/fleetd/internal/version"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("fleetd", version.Version)
		return
	}
	fmt.Fprintln(os.Stderr, "usage: fleetd version")
	os.Exit(2)
}
