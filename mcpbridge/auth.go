package mcpbridge

import (
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
)

// authTransport is the http.RoundTripper under every request to the gateway.
// It adds the bearer token (to the gateway's own origin only, so a redirect
// elsewhere never carries it), adds the negotiated Mcp-Protocol-Version when
// the go-sdk transport could not (it learns the version only from a session
// it runs itself), and turns a 401 into [ErrTokenRefused].
type authTransport struct {
	origin  string
	token   string
	base    http.RoundTripper
	version atomic.Pointer[string]
}

func (t *authTransport) setProtocolVersion(v string) { t.version.Store(&v) }

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	if origin(out.URL) == t.origin {
		out.Header.Set("Authorization", "Bearer "+t.token)
	}
	if v := t.version.Load(); v != nil && out.Header.Get(protocolVersionHeader) == "" {
		out.Header.Set(protocolVersionHeader, *v)
	}
	resp, err := t.base.RoundTrip(out)
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
