// Package herdr is fleetd's client for herdr's Unix-socket JSON API, protocol
// 20 (see PROTOCOL.md in the shared herdr notes and herdr's own
// herdr-api.schema.json).
package herdr
