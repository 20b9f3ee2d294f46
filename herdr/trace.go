package herdr

import "context"

// ClientTrace hooks into the calls of a [Client] made with a context that
// carries it ([WithClientTrace]), as net/http/httptrace does for HTTP.
type ClientTrace struct {
	// WroteRequest, if set, is called once a call's request line is
	// written to herdr, before its answer is read, on the calling
	// goroutine: what the caller does there overlaps herdr's work on the
	// request. It is not called for a request that could not be written.
	WroteRequest func()
}

type clientTraceKey struct{}

// WithClientTrace returns a context whose calls report to trace.
func WithClientTrace(ctx context.Context, trace *ClientTrace) context.Context {
	return context.WithValue(ctx, clientTraceKey{}, trace)
}

// wroteRequest calls the WroteRequest hook of ctx's trace, if any.
func wroteRequest(ctx context.Context) {
	if t, _ := ctx.Value(clientTraceKey{}).(*ClientTrace); t != nil && t.WroteRequest != nil {
		t.WroteRequest()
	}
}
