// Package version holds fleetd's build version, set at link time by the
// Makefile (-X .../internal/version.Version=...).
package version
