package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// resolveMember finds the member ref names — its name, pane id, terminal id
// or session id — the way every fleetd command accepts one: the running
// fleetd resolves it (GET /members/{ref}, mcp.ResolveMember, the same
// resolver DELETE and the bridge tools use). A reference that names no
// member is an error saying so.
func resolveMember(ctx context.Context, c *apiClient, ref string) (v1alpha1.Member, error) {
	var m v1alpha1.Member
	err := c.get(ctx, "/members/"+url.PathEscape(ref), &m)
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusNotFound {
		return m, fmt.Errorf("no member with name, pane id, terminal id or session id %s; fleetd get members lists them", termtext.Line(fmt.Sprintf("%q", ref)))
	}
	return m, err
}
