package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// resource is a kind `fleetd get` and `describe` read from a running
// fleetd.
type resource struct {
	kind    string // Member, Profile, Tenant
	plural  string // members, profiles, tenants: also the REST path
	aliases []string
}

var resources = []resource{
	{kind: v1alpha1.KindMember, plural: "members", aliases: []string{"member", "mem", "m"}},
	{kind: v1alpha1.KindProfile, plural: "profiles", aliases: []string{"profile", "prof"}},
	{kind: v1alpha1.KindTenant, plural: "tenants", aliases: []string{"tenant"}},
	nodeResource, // getnodes.go
}

const resourceNames = "members, profiles, tenants or nodes"

// lookupResource finds a resource by its plural, singular or short name.
func lookupResource(s string) (resource, bool) {
	for _, r := range resources {
		if s == r.plural || strings.EqualFold(s, r.kind) {
			return r, true
		}
		for _, a := range r.aliases {
			if s == a {
				return r, true
			}
		}
	}
	return resource{}, false
}

// nameOf is how -o name prints an object: member/reviewer.
func (r resource) nameOf(name string) string {
	return strings.ToLower(r.kind) + "/" + termtext.Line(name)
}

// object is what get reads of any kind: the typed object, for the tables,
// and its name and labels, for -l and -o name.
type object interface {
	GetName() string
	GetMeta() *v1alpha1.ObjectMeta
}

// fetch reads one object (name not empty; a member by any reference
// fleetd resolves) or every object of r.
func (r resource) fetch(ctx context.Context, c *apiClient, name string) ([]object, error) {
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
	object
}](ctx context.Context, c *apiClient, path string, one bool) ([]object, error) {
	if one {
		var v T
		if err := c.get(ctx, path, &v); err != nil {
			return nil, err
		}
		return []object{P(&v)}, nil
	}
	var list struct {
		Items []T `json:"items"`
	}
	if err := c.get(ctx, path, &list); err != nil {
		return nil, err
	}
	out := make([]object, len(list.Items))
	for i := range list.Items {
		out[i] = P(&list.Items[i])
	}
	return out, nil
}

// objectList is the JSON and YAML of several Profiles or Tenants, shaped
// as GET /profiles and /tenants send them.
type objectList struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Items      []object `json:"items"`
}

// printObjects prints objects of r in the format asked for; single is a
// get by name (one object, not a List, in JSON, YAML and templates).
func (r resource) printObjects(w io.Writer, objs []object, f outputFormat, single bool, now time.Time) error {
	switch {
	case f.name == "name":
		for _, o := range objs {
			if _, err := fmt.Fprintln(w, r.nameOf(o.GetName())); err != nil {
				return err
			}
		}
		return nil
	case f.templated():
		if single {
			return f.executeTemplate(w, objs[0])
		}
		return f.executeTemplate(w, listOf(objs))
	}
	if r.kind == v1alpha1.KindMember {
		members := make([]v1alpha1.Member, len(objs))
		for i, o := range objs {
			members[i] = *o.(*v1alpha1.Member)
		}
		return printMembers(w, members, f.name, single, now)
	}
	if f.name == "json" || f.name == "yaml" {
		items := objs
		if items == nil {
			items = []object{}
		}
		var v any = objectList{APIVersion: v1alpha1.GroupVersion, Kind: r.kind + "List", Items: items}
		if single {
			v = objs[0]
		}
		return writeStructured(w, v, f.name)
	}
	if len(objs) == 0 {
		_, err := fmt.Fprintf(w, "No %s found.\n", r.plural)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	wide := f.name == "wide"
	switch r.kind {
	case v1alpha1.KindProfile:
		header := "NAME\tHARNESS\tRESTART\tRESUME\tAGE"
		if wide {
			header += "\tCWD\tDESCRIPTION"
		}
		fmt.Fprintln(tw, header)
		for _, o := range objs {
			p := o.(*v1alpha1.Profile)
			row := []string{p.Name, p.Spec.Harness, dash(p.Spec.RestartPolicy), dash(p.Spec.Resume), age(p.CreationTimestamp, now)}
			if wide {
				row = append(row, dash(p.Spec.Cwd), dash(p.Spec.Description))
			}
			fmt.Fprintln(tw, cells(row))
		}
	case v1alpha1.KindTenant:
		fmt.Fprintln(tw, "NAME\tURL\tCREDENTIAL ENV\tAGE")
		for _, o := range objs {
			t := o.(*v1alpha1.Tenant)
			fmt.Fprintln(tw, cells([]string{t.Name, t.Spec.URL, t.Spec.CredentialEnv, age(t.CreationTimestamp, now)}))
		}
	case v1alpha1.KindNode:
		printNodes(tw, objs, wide, now)
	}
	return tw.Flush()
}

// describeProfile prints a Profile. Its env values are the operator's and
// may be credentials: describe names the variables, -o yaml shows them.
func describeProfile(w io.Writer, p *v1alpha1.Profile, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	line := fieldLine(tw)
	describeMeta(line, &p.ObjectMeta, now)
	s := p.Spec
	fmt.Fprintln(tw, "Spec:")
	line(1, "Harness", s.Harness)
	line(1, "Description", dash(s.Description))
	args := "<none>"
	if len(s.Args) > 0 {
		args = strings.Join(s.Args, " ")
	}
	line(1, "Args", args)
	envText := "<none>"
	if len(s.Env) > 0 {
		envText = strings.Join(slices.Sorted(maps.Keys(s.Env)), ",") + " (values: -o yaml)"
	}
	line(1, "Env", envText)
	line(1, "Cwd", dash(s.Cwd))
	line(1, "Startup Timeout", durationText(s.StartupTimeout))
	line(1, "Tool Timeout", durationText(s.ToolTimeout))
	line(1, "Restart Policy", dash(s.RestartPolicy))
	line(1, "Resume", dash(s.Resume))
	return tw.Flush()
}

// describeTenant prints a Tenant: its gateway and the name of the variable
// holding its credential (never the credential).
func describeTenant(w io.Writer, t *v1alpha1.Tenant, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	line := fieldLine(tw)
	describeMeta(line, &t.ObjectMeta, now)
	fmt.Fprintln(tw, "Spec:")
	line(1, "URL", t.Spec.URL)
	line(1, "Credential Env", t.Spec.CredentialEnv)
	return tw.Flush()
}

// fieldLine returns describe's line printer: "key:<tab>value" at indent
// levels of two spaces, the value made safe for a terminal.
func fieldLine(tw io.Writer) func(indent int, key, value string) {
	return func(indent int, key, value string) {
		fmt.Fprintf(tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), key, termtext.Line(value))
	}
}

func describeMeta(line func(int, string, string), m *v1alpha1.ObjectMeta, now time.Time) {
	line(0, "Name", m.Name)
	line(0, "Labels", mapString(m.Labels))
	line(0, "Annotations", mapString(m.Annotations))
	if m.CreationTimestamp != nil {
		line(0, "Created", m.CreationTimestamp.UTC().Format(time.RFC3339)+" ("+age(m.CreationTimestamp, now)+" ago)")
	}
}

func durationText(d v1alpha1.Duration) string {
	if d.Duration == 0 {
		return "-"
	}
	return d.Duration.String()
}
