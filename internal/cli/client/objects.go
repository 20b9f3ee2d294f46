package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// objectsPath is the REST path of a kind's objects: /members, /profiles,
// /tenants.
func objectsPath(kind string) string { return "/" + strings.ToLower(kind) + "s" }

// Apply sends obj — a Member, Profile or Tenant — to fleetd (POST /members,
// /profiles or /tenants), which writes it into its desired state, and
// returns what that did: created, configured or unchanged. With dryRun
// fleetd checks everything and writes nothing.
func (c *Client) Apply(ctx context.Context, obj v1alpha1.Object, dryRun bool) (string, error) {
	path := objectsPath(obj.GetObjectKind())
	if dryRun {
		path += "?dryRun=All"
	}
	var res struct{ Result string } // mcp.WriteResult's and mcp.ObjectResult's
	status, err := c.Post(ctx, path, obj, &res)
	if err == nil && res.Result == "" && status == http.StatusCreated {
		return "created", nil
	}
	return res.Result, err
}

// Live reads the object of kind fleetd has by name; found is false when it
// has none.
func (c *Client) Live(ctx context.Context, kind, name string) (obj v1alpha1.Object, found bool, err error) {
	if obj = v1alpha1.New(kind); obj == nil {
		return nil, false, fmt.Errorf("fleetd has no objects of kind %q", kind)
	}
	if err := c.Get(ctx, objectsPath(kind)+"/"+url.PathEscape(name), obj); err != nil {
		if IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return obj, true, nil
}

// DeleteObject deletes the object of kind by name (DELETE
// /members/{name}, /profiles/{name} or /tenants/{name}). fleetd refuses a
// Profile or Tenant a Member references with a conflict naming them.
func (c *Client) DeleteObject(ctx context.Context, kind, name string) error {
	var res struct{ Result string }
	return c.Delete(ctx, objectsPath(kind)+"/"+url.PathEscape(name), &res)
}
