// Command fleetd runs and manages a fleet of coding agents inside herdr.
//
// Each subcommand lives in its own file and is registered in newRootCmd;
// a command appears in --help only once it works.
package main
