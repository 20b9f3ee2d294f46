package mcpbridge

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
)

// BearerTransport is an http.RoundTripper that presents a bearer token to
// one origin (scheme://host[:port]) only: a request elsewhere, such as a
// redirect away from the gateway, goes out without it. Requests are cloned,
// never modified. Create it with [NewBearerTransport]; every fleetd MCP
// client (this relay, the simulated agents, tests) can share it.
type BearerTransport struct {
	origin string
	token  string
	base   http.RoundTripper
}

// NewBearerTransport returns a BearerTransport that sends token as
// "Authorization: Bearer" to the origin of endpoint over base (nil means
// http.DefaultTransport).
func NewBearerTransport(endpoint, token string, base http.RoundTripper) (*BearerTransport, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("gateway URL %q: %w", endpoint, err)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &BearerTransport{origin: origin(u), token: token, base: base}, nil
}

func (t *BearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	t.authorize(out)
	return t.base.RoundTrip(out)
}

// authorize adds the token to r, a request of ours, if it goes to the origin.
func (t *BearerTransport) authorize(r *http.Request) {
	if origin(r.URL) == t.origin {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
}

// authTransport is the http.RoundTripper under every request to the gateway.
// It adds the bearer token (see [BearerTransport]), adds the negotiated
// Mcp-Protocol-Version when the go-sdk transport could not (it learns the
// version only from a session it runs itself), and turns a 401 into
// [ErrTokenRefused].
type authTransport struct {
	bearer  *BearerTransport
	version atomic.Pointer[string]
}

func (t *authTransport) setProtocolVersion(v string) { t.version.Store(&v) }

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	t.bearer.authorize(out)
	if v := t.version.Load(); v != nil && out.Header.Get(protocolVersionHeader) == "" {
		out.Header.Set(protocolVersionHeader, *v)
	}
	resp, err := t.bearer.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return nil, ErrTokenRefused
	}
	return resp, nil
}

// origin is scheme://host[:port] of u, the unit a bearer token is scoped to.
func origin(u *url.URL) string {
	return u.Scheme + "://" + u.Host
}
