package mcp

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// TestManifestErrors_ThePrimaryReadsTheStoresProblems: GET
// /manifests/errors serves the store's current problems to the primary,
// with absolute paths (the CLI may run elsewhere than fleetd's directory)
// and the object each broken document declares; a worker is refused.
func TestManifestErrors_ThePrimaryReadsTheStoresProblems(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	errs := decode.ErrorList{
		{File: "manifests/typo.yaml", Line: 4, Field: "spec.transport", Msg: `unknown value "http"`, Kind: v1alpha1.KindMember, Name: "typo"},
		{File: "/srv/m/broken.yaml", Line: 2, Msg: "did not find expected key"},
	}
	h, err := NewHandler(Options{Members: fakeMembers{}, Tokens: fakeTokens{"primary-secret": {Role: "primary"}, "worker-secret": {Role: "worker", Member: "a"}},
		ManifestErrors: func() decode.ErrorList { return errs }, ManifestsDir: filepath.Join(cwd, "manifests")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	var list ManifestErrorList
	getJSON(t, srv.URL+"/manifests/errors", "primary-secret", &list)
	want := ManifestErrorList{APIVersion: v1alpha1.GroupVersion, Kind: "ManifestErrorList", Directory: filepath.Join(cwd, "manifests"), Items: []ManifestError{
		{File: filepath.Join(cwd, "manifests/typo.yaml"), Line: 4, Field: "spec.transport", Message: `unknown value "http"`, Object: &ObjectRef{Kind: "Member", Name: "typo"}},
		{File: "/srv/m/broken.yaml", Line: 2, Message: "did not find expected key"},
	}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("GET /manifests/errors (-want +got):\n%s", diff)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/manifests/errors", nil)
	req.Header.Set("Authorization", "Bearer worker-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a worker's GET /manifests/errors: %s, want 403", resp.Status)
	}
}
