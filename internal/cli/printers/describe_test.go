package printers

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// describeLeavesOut are the fields of api/v1alpha1's specs and statuses
// that `fleetd describe` deliberately does not show, each with why. Every
// other field must change the page when it changes.
var describeLeavesOut = map[string]string{
	// kubectl describe leaves a condition's observedGeneration out too; the
	// member's own Observed Generation is on the page.
	"Member.status.conditions[].observedGeneration":  "kubectl leaves it out; status.observedGeneration is shown",
	"Node.status.conditions[].observedGeneration":    "kubectl leaves it out",
	"Profile.status.conditions[].observedGeneration": "kubectl leaves it out; status.observedGeneration is shown",
	// Which herdr integration reported the agent's session: the agent,
	// the kind and the value name the session itself.
	"Member.status.resumedSession.source": "the reporting integration, not the session",
	// A digest other nodes compare with the profile's: the rollout line
	// and the UpToDate condition say it in words.
	"Member.status.profileTarget": "a digest for the other nodes; UpToDate and the rollout line say it",
	// When herdr's reachability last changed: the Ready condition's SINCE
	// column says when the node's state changed.
	"Node.status.herdr.since": "the Ready condition's SINCE says it",
}

// fieldOverrides are values a field must hold for other fields to show.
var fieldOverrides = map[string]any{
	// A tenant id is shown only for a tenant target.
	"Member.spec.mcpTarget.kind": v1alpha1.TargetTenant,
}

// describeNow is the clock of the describe pages in these tests.
var describeNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// TestDescribe_ShowsEveryField: every field of a Member's, Profile's,
// Tenant's and Node's spec and status (api/v1alpha1) is on its describe
// page — the page with every field set changes when any one field is
// cleared — unless describeLeavesOut names it. A field added to those
// types fails here until describe has a line for it (memberSpecFields,
// profileSpecFields, …) or describeLeavesOut says why not.
func TestDescribe_ShowsEveryField(t *testing.T) {
	for _, kind := range describedKinds {
		t.Run(kind.name, func(t *testing.T) {
			// page is the describe page of an object with every field set
			// but the one at clear ("": none).
			page := func(clear string) string {
				obj := kind.new()
				for _, l := range fillFields(obj) {
					if l.path == clear {
						l.v.Set(reflect.Zero(l.v.Type()))
					}
				}
				var buf bytes.Buffer
				if err := kind.describe(&buf, obj); err != nil {
					t.Fatal(err)
				}
				return buf.String()
			}
			full := page("")
			leaves := fillFields(kind.new())
			if len(leaves) == 0 {
				t.Fatal("no fields found")
			}
			for _, l := range leaves {
				shown := page(l.path) != full
				_, out := describeLeavesOut[l.path]
				switch {
				case !shown && !out:
					t.Errorf("describe %s does not show %s: the page is the same without it; add its line to the %s's fields in describe.go, or add it to describeLeavesOut with why",
						strings.ToLower(kind.name), l.path, kind.name)
				case shown && out:
					t.Errorf("describe %s shows %s, which describeLeavesOut says it leaves out: remove it there", strings.ToLower(kind.name), l.path)
				}
			}
		})
	}
	fields := map[string]bool{}
	for _, kind := range describedKinds {
		for _, l := range fillFields(kind.new()) {
			fields[l.path] = true
		}
	}
	for path := range describeLeavesOut {
		if !fields[path] {
			t.Errorf("describeLeavesOut names %s, which is no field", path)
		}
	}
}

// describedKinds are the kinds `fleetd describe` prints.
var describedKinds = []struct {
	name     string
	new      func() any
	describe func(w *bytes.Buffer, obj any) error
}{
	{v1alpha1.KindMember, func() any { return &v1alpha1.Member{} }, func(w *bytes.Buffer, o any) error {
		return DescribeMember(w, o.(*v1alpha1.Member), nil, describeNow)
	}},
	{v1alpha1.KindProfile, func() any { return &v1alpha1.Profile{} }, func(w *bytes.Buffer, o any) error {
		return DescribeProfile(w, o.(*v1alpha1.Profile), nil, describeNow)
	}},
	{v1alpha1.KindTenant, func() any { return &v1alpha1.Tenant{} }, func(w *bytes.Buffer, o any) error {
		return DescribeTenant(w, o.(*v1alpha1.Tenant), describeNow)
	}},
	{v1alpha1.KindNode, func() any { return &v1alpha1.Node{} }, func(w *bytes.Buffer, o any) error {
		return DescribeNode(w, o.(*v1alpha1.Node), describeNow)
	}},
}

// A leaf is a field fillFields set: its path (Member.spec.mcpTarget.kind,
// Member.status.plan[].url) and the value to clear.
type leaf struct {
	path string
	v    reflect.Value
}

// fillFields sets every field of obj's spec and status (obj is a pointer
// to a Member, Profile, Tenant or Node) to a value of its own (a list or
// map holds one), and returns them. Values are distinct so that no field's
// value is mistaken for another's.
func fillFields(obj any) []leaf {
	v := reflect.ValueOf(obj).Elem()
	kind := v.Type().Name()
	n := 0
	var leaves []leaf
	var fill func(v reflect.Value, path string)
	fill = func(v reflect.Value, path string) {
		n++
		if o, ok := fieldOverrides[path]; ok {
			v.Set(reflect.ValueOf(o))
			leaves = append(leaves, leaf{path, v})
			return
		}
		switch v.Interface().(type) {
		case v1alpha1.Duration:
			v.Set(reflect.ValueOf(v1alpha1.Duration{Duration: time.Duration(n) * time.Second}))
			leaves = append(leaves, leaf{path, v})
			return
		case time.Time:
			v.Set(reflect.ValueOf(describeNow.Add(-time.Duration(n) * time.Minute)))
			leaves = append(leaves, leaf{path, v})
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), path)
			if elem := v.Type().Elem(); elem.Kind() != reflect.Struct || elem == reflect.TypeFor[time.Time]() {
				leaves[len(leaves)-1].v = v // one value: cleared, the pointer is nil
			}
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if !f.IsExported() {
					continue
				}
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "" {
					name = f.Name
				}
				fill(v.Field(i), path+"."+name)
			}
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			if v.Type().Elem().Kind() == reflect.Struct {
				fill(v.Index(0), path+"[]")
				return
			}
			fill(v.Index(0), path)
			leaves[len(leaves)-1].v = v
		case reflect.Map:
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			k.SetString(fmt.Sprintf("key%d", n))
			e.SetString(fmt.Sprintf("value%d", n))
			v.Set(reflect.MakeMap(v.Type()))
			v.SetMapIndex(k, e)
			leaves = append(leaves, leaf{path, v})
		case reflect.String:
			v.SetString(fmt.Sprintf("text%d", n))
			leaves = append(leaves, leaf{path, v})
		case reflect.Bool:
			v.SetBool(true)
			leaves = append(leaves, leaf{path, v})
		case reflect.Int, reflect.Int32, reflect.Int64:
			v.SetInt(int64(n))
			leaves = append(leaves, leaf{path, v})
		default:
			panic(fmt.Sprintf("fillFields: %s is a %s; teach the test to fill it", path, v.Type()))
		}
	}
	for _, part := range []string{"Spec", "Status"} {
		if f := v.FieldByName(part); f.IsValid() {
			fill(f, kind+"."+strings.ToLower(part))
		}
	}
	return leaves
}
