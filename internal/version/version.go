// Package version holds fleetd's build version, set at link time by the
// Makefile (-X .../internal/version.Version=...).
package version

// Version is the build's version; "dev" when built without the Makefile.
var Version = "dev"
