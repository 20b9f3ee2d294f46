package mcpbridge

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// headerRecorder serves 204 (or redirects to redirectTo) and records the
// headers fleetd cares about.
type headerRecorder struct {
	mu         sync.Mutex
	auth       []string
	versions   []string
	redirectTo string
	status     int
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.auth = append(h.auth, r.Header.Get("Authorization"))
	h.versions = append(h.versions, r.Header.Get(protocolVersionHeader))
	h.mu.Unlock()
	if h.redirectTo != "" {
		http.Redirect(w, r, h.redirectTo, http.StatusFound)
		return
	}
	if h.status != 0 {
		w.WriteHeader(h.status)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func newAuthClient(t *testing.T, endpoint, token string) (*http.Client, *authTransport) {
	t.Helper()
	bearer, err := NewBearerTransport(endpoint, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := &authTransport{bearer: bearer}
	return &http.Client{Transport: at}, at
}

func TestTransports_TokenStaysWithTheGatewayOrigin(t *testing.T) {
	tests := []struct {
		name   string
		client func(t *testing.T, endpoint, token string) *http.Client
	}{
		{"relay", func(t *testing.T, endpoint, token string) *http.Client {
			c, _ := newAuthClient(t, endpoint, token)
			return c
		}},
		{"BearerTransport", func(t *testing.T, endpoint, token string) *http.Client {
			bt, err := NewBearerTransport(endpoint, token, nil)
			if err != nil {
				t.Fatal(err)
			}
			return &http.Client{Transport: bt}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			elsewhere := &headerRecorder{}
			other := httptest.NewServer(elsewhere)
			defer other.Close()
			gw := &headerRecorder{redirectTo: other.URL + "/collect"}
			gateway := httptest.NewServer(gw)
			defer gateway.Close()

			client := tt.client(t, gateway.URL+"/mcp", "secret-token")
			resp, err := client.Get(gateway.URL + "/mcp")
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			resp.Body.Close()

			if diff := cmp.Diff([]string{"Bearer secret-token"}, gw.auth); diff != "" {
				t.Errorf("Authorization seen by the gateway (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{""}, elsewhere.auth); diff != "" {
				t.Errorf("Authorization seen by the redirect target (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAuthTransport_ProtocolVersionOnceKnown(t *testing.T) {
	gw := &headerRecorder{}
	gateway := httptest.NewServer(gw)
	defer gateway.Close()
	client, at := newAuthClient(t, gateway.URL, "tok")

	do := func(explicit string) {
		req, _ := http.NewRequest(http.MethodPost, gateway.URL, nil)
		if explicit != "" {
			req.Header.Set(protocolVersionHeader, explicit)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	do("") // before initialize: unknown, not sent
	at.setProtocolVersion("2025-11-25")
	do("")           // learned version added
	do("2026-07-28") // a version the message itself carries wins
	if diff := cmp.Diff([]string{"", "2025-11-25", "2026-07-28"}, gw.versions); diff != "" {
		t.Errorf("Mcp-Protocol-Version headers (-want +got):\n%s", diff)
	}
}

func TestAuthTransport_UnauthorizedIsTokenRefused(t *testing.T) {
	gateway := httptest.NewServer(&headerRecorder{status: http.StatusUnauthorized})
	defer gateway.Close()
	client, _ := newAuthClient(t, gateway.URL, "tok")
	_, err := client.Get(gateway.URL)
	if !errors.Is(err, ErrTokenRefused) {
		t.Errorf("GET answered 401 = %v, want ErrTokenRefused", err)
	}
}
