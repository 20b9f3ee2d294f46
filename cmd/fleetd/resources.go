package main

import (
	"context"
	"fmt"
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

const resourceNames = "members, profiles, tenants, nodes or events"

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

// notAKind is the usage error for a first argument that names no kind,
// `fleetd describe reviewer`: problem on one line, then the command meant
// when o's fleetd has a member, profile, tenant or node by that name
// (`fleetd describe member reviewer`; get's plural for get), else usage.
// It exits 2 like every usage error; it is told by Run, not Validate,
// because the hint asks the running fleetd what the word names.
func (s *ioStreams) notAKind(ctx context.Context, o *serverOptions, c *client.Client, verb, word, problem, usage string) error {
	hint := usage
	for _, r := range resources {
		if _, err := r.fetch(ctx, c, word); err != nil {
			continue
		}
		kind := strings.ToLower(r.kind)
		if verb == "get" {
			kind = r.plural
		}
		hint = "Did you mean: " + o.command(verb, kind, word) + "?"
		break
	}
	fmt.Fprintf(s.errOut, "fleetd %s: %s\n%s\n", verb, problem, hint)
	return &exitError{code: 2}
}
