package mcp

import "net/http"

// LoopbackHostOnly refuses, with 403, requests whose Host is not a
// loopback name: the same DNS-rebinding check [NewHandler] applies with
// Options.Loopback, for another handler on the same listener (the browser
// console).
func LoopbackHostOnly(next http.Handler) http.Handler { return loopbackHostOnly(next) }
