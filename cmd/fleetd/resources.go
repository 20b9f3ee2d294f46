package main

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/cli/printers"
)

// resource is a kind `fleetd get` and `describe` read from a running
// fleetd.
type resource struct {
	kind    string // Member, Profile, Tenant, Node
	plural  string // members, profiles, tenants, nodes: also the REST path
	aliases []string
}

var (
	memberResource = resource{kind: v1alpha1.KindMember, plural: "members", aliases: []string{"member", "mem", "m"}}
	resources      = []resource{
		memberResource,
		{kind: v1alpha1.KindProfile, plural: "profiles", aliases: []string{"profile", "prof"}},
		{kind: v1alpha1.KindTenant, plural: "tenants", aliases: []string{"tenant"}},
		// The machines of a fleet on etcd, as GET /nodes serves them.
		{kind: v1alpha1.KindNode, plural: "nodes", aliases: []string{"node", "no"}},
	}
)

const resourceNames = "members, profiles, tenants or nodes"

// lookupResource finds a resource by its plural, singular or short name.
func lookupResource(s string) (resource, bool) {
	for _, r := range resources {
		if r.is(s) || strings.EqualFold(s, r.kind) {
			return r, true
		}
	}
	return resource{}, false
}

// is reports whether s is r's plural or one of its aliases.
func (r resource) is(s string) bool { return s == r.plural || slices.Contains(r.aliases, s) }

// printer prints r's objects in format f.
func (r resource) printer(f printers.Format) printers.Printer {
	return printers.Printer{Kind: r.kind, Plural: r.plural, Format: f}
}

// fetch reads one object (name not empty; a member by any reference
// fleetd resolves) or every object of r.
func (r resource) fetch(ctx context.Context, c *client.Client, name string) ([]printers.Object, error) {
	path := "/" + r.plural
	if name != "" {
		path += "/" + url.PathEscape(name)
	}
	switch r.kind {
	case v1alpha1.KindProfile:
		return fetchAs[v1alpha1.Profile](ctx, c, path, name != "")
	case v1alpha1.KindTenant:
		return fetchAs[v1alpha1.Tenant](ctx, c, path, name != "")
	case v1alpha1.KindNode:
		return fetchAs[v1alpha1.Node](ctx, c, path, name != "")
	}
	return fetchAs[v1alpha1.Member](ctx, c, path, name != "")
}

// fetchAs reads path as one T (one) or a list of them.
func fetchAs[T any, P interface {
	*T
	printers.Object
}](ctx context.Context, c *client.Client, path string, one bool) ([]printers.Object, error) {
	if one {
		var v T
		if err := c.Get(ctx, path, &v); err != nil {
			return nil, err
		}
		return []printers.Object{P(&v)}, nil
	}
	var list struct {
		Items []T `json:"items"`
	}
	if err := c.Get(ctx, path, &list); err != nil {
		return nil, err
	}
	out := make([]printers.Object, len(list.Items))
	for i := range list.Items {
		out[i] = P(&list.Items[i])
	}
	return out, nil
}
