package encode

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// everyField returns objects of each kind that together set every field,
// none to its default: TestEncode_RoundTripsEveryField checks that by
// reflection, so a field added to the types fails there until it is set
// here. Fields that exclude each other (a Member's cwd and worktree) are
// set in two objects of the kind.
func everyField() []v1alpha1.Object {
	created := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	meta := func(name string) v1alpha1.ObjectMeta {
		return v1alpha1.ObjectMeta{Name: name, Labels: map[string]string{"team": "api", "tier": "2"},
			Annotations: map[string]string{"fleetd.dev/note": "two\nlines"}, UID: "u-1", Generation: 3,
			CreationTimestamp: &created, ResourceVersion: "42"}
	}
	return []v1alpha1.Object{
		&v1alpha1.Member{
			TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindMember},
			ObjectMeta: meta("reviewer"),
			Spec: v1alpha1.MemberSpec{Profile: "codex-fast", MCPTarget: &v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "acme"},
				Transport: v1alpha1.TransportStdio, Workspace: "api", Cwd: "/srv/api", Prompt: "Review open PRs.\nBe kind.\n",
				Paused: true, NodeName: "node-a", NodeSelector: map[string]string{"zone": "eu", "gpu": "yes"},
				TerminationGracePeriod: &v1alpha1.Duration{Duration: 90 * time.Second},
				UpdateStrategy:         &v1alpha1.UpdateStrategy{MaxWait: &v1alpha1.Duration{Duration: 30 * time.Minute}}},
			Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, NodeName: "node-a", ObservedGeneration: 3,
				Conditions: []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue, ObservedGeneration: 3,
					LastTransitionTime: created, Reason: "Ready", Message: "ok"}},
				SessionID: "s-1", PaneID: "w1:p1", TerminalID: "t1", WorkspaceID: "w1", TabID: "w1:t1", AgentStatus: "idle",
				Restarts: 2, LastError: "none", Plan: []v1alpha1.PlanRow{{Server: "fleetd", Target: v1alpha1.TargetTenant,
					Transport: v1alpha1.TransportStdio, URL: "https://fleet.acme.example/mcp", CredentialEnv: "FLEETD_TENANT_TOKEN"}},
				ResumedSession: &v1alpha1.AgentSession{Source: "herdr", Agent: "codex", Kind: v1alpha1.AgentSessionKindID, Value: "s-9"},
				Rollout:        "codex-fast", ProfileTarget: "0123abcd"},
		},
		&v1alpha1.Member{
			TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindMember},
			ObjectMeta: meta("builder"),
			Spec: v1alpha1.MemberSpec{Profile: "codex-fast", MCPTarget: &v1alpha1.MCPTarget{Kind: v1alpha1.TargetResident},
				Transport: v1alpha1.TransportStreamableHTTP, Workspace: "fleetd",
				Worktree: &v1alpha1.MemberWorktree{Repo: "/srv/api", Branch: "agents/builder", Base: "origin/main", Cleanup: v1alpha1.CleanupOnDelete}},
			Status: v1alpha1.MemberStatus{Worktree: &v1alpha1.WorktreeStatus{Path: "/srv/api.worktrees/agents/builder", Branch: "agents/builder",
				Head: "0123456789abcdef0123456789abcdef01234567", Dirty: 2, Ahead: 1, Behind: 3, LastCommit: "add the parser"}},
		},
		&v1alpha1.Profile{
			TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindProfile},
			ObjectMeta: meta("codex-fast"),
			Spec: v1alpha1.ProfileSpec{Harness: "codex", Description: "fast codex", Args: []string{"-m", "gpt-5.4"},
				Env: map[string]string{"OPENAI_BASE_URL": "https://proxy.example", "LOG": "1"}, Cwd: "/srv",
				StartupTimeout: v1alpha1.Duration{Duration: 90 * time.Second}, RestartPolicy: v1alpha1.RestartOnFailure,
				ToolTimeout: v1alpha1.Duration{Duration: 20 * time.Minute}, Resume: v1alpha1.ResumeNever,
				Worktree:               &v1alpha1.ProfileWorktree{Repo: "/srv/api", BranchPrefix: "agents", Base: "main", Cleanup: v1alpha1.CleanupOnDelete, TrustRepository: true},
				TerminationGracePeriod: v1alpha1.Duration{Duration: 5 * time.Minute},
				Rollout:                &v1alpha1.ProfileRollout{MaxUnavailable: &v1alpha1.IntOrPercent{Value: 25, Percent: true}, Paused: true}},
			Status: v1alpha1.ProfileStatus{ObservedGeneration: 3, Revision: 2, Members: 3, UpdatedMembers: 2, ReadyMembers: 1,
				Updating: []string{"reviewer"}, Conditions: []v1alpha1.Condition{{Type: v1alpha1.ConditionProgressing,
					Status: v1alpha1.ConditionTrue, LastTransitionTime: created, Reason: v1alpha1.ReasonRollingOut, Message: "2 of 3"}}},
		},
		&v1alpha1.Profile{
			TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindProfile},
			ObjectMeta: meta("claude"),
			Spec: v1alpha1.ProfileSpec{Harness: "claude", StartupTimeout: v1alpha1.Duration{Duration: 90 * time.Second},
				RestartPolicy: v1alpha1.RestartAlways, ToolTimeout: v1alpha1.Duration{Duration: 20 * time.Minute}, Resume: v1alpha1.ResumeAuto,
				TerminationGracePeriod: v1alpha1.Duration{Duration: 5 * time.Minute},
				Rollout:                &v1alpha1.ProfileRollout{MaxUnavailable: &v1alpha1.IntOrPercent{Value: 2}}},
		},
		&v1alpha1.Tenant{
			TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindTenant},
			ObjectMeta: meta("acme"),
			Spec:       v1alpha1.TenantSpec{URL: "https://fleet.acme.example/mcp", CredentialEnv: "ACME_FLEETD_TOKEN"},
		},
	}
}

// unset lists the fields of v (by JSON path) that hold their zero value.
func unset(v reflect.Value, path string) []string {
	switch {
	case v.Kind() == reflect.Pointer && !v.IsNil():
		return unset(v.Elem(), path)
	case v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Time]():
		var out []string
		for i := range v.NumField() {
			out = append(out, unset(v.Field(i), jsonPath(path, v.Type().Field(i)))...)
		}
		return out
	case v.Kind() == reflect.Slice || v.Kind() == reflect.Map:
		if v.Len() == 0 {
			return []string{path}
		}
		return nil
	case v.IsZero():
		return []string{path}
	}
	return nil
}

// jsonPath is the field path of f under path: its JSON name, or path
// itself for an inlined field.
func jsonPath(path string, f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch {
	case name == "":
		return path
	case path == "":
		return name
	}
	return path + "." + name
}

// dropOwned zeroes the fields encode leaves out: those fleetd owns
// (decode.FleetdOwned) and the stored version.
func dropOwned(v reflect.Value, path string) {
	for i := range v.NumField() {
		p := jsonPath(path, v.Type().Field(i))
		switch f := v.Field(i); {
		case decode.FleetdOwned(p) || p == "metadata.resourceVersion":
			f.SetZero()
		case f.Kind() == reflect.Struct:
			dropOwned(f, p)
		}
	}
}

// TestEncode_RoundTripsEveryField: an object with every field set, written
// by Node and by Minimal and decoded again, is the object it was, without
// the fields fleetd owns. A field the encoder loses, or the decoder does
// not read back, fails here.
func TestEncode_RoundTripsEveryField(t *testing.T) {
	// A field is left unset when no object of its kind sets it: each has
	// it, or a field above it (a nil pointer), among its unset fields.
	unsetOf := map[string][][]string{}
	for _, obj := range everyField() {
		unsetOf[obj.GetObjectKind()] = append(unsetOf[obj.GetObjectKind()], unset(reflect.ValueOf(obj), ""))
	}
	for kind, lists := range unsetOf {
		var never []string
		for _, f := range slices.Concat(lists...) {
			everywhere := !slices.Contains(never, f)
			for _, l := range lists {
				everywhere = everywhere && slices.ContainsFunc(l, func(p string) bool { return p == f || strings.HasPrefix(f, p+".") })
			}
			if everywhere {
				never = append(never, f)
			}
		}
		if len(never) > 0 {
			t.Errorf("the %s test objects leave %v unset; set every field in one of them", kind, never)
		}
	}
	for _, obj := range everyField() {
		t.Run(obj.GetObjectKind()+"/"+obj.GetName(), func(t *testing.T) {
			want := reflect.New(reflect.TypeOf(obj).Elem())
			want.Elem().Set(reflect.ValueOf(obj).Elem())
			dropOwned(want.Elem(), "")
			node, err := Node(obj)
			if err != nil {
				t.Fatal(err)
			}
			minimal, err := Minimal(obj, nil)
			if err != nil {
				t.Fatal(err)
			}
			for name, n := range map[string]*yaml.Node{"Node": node, "Minimal": minimal} {
				text, err := Marshal(n)
				if err != nil {
					t.Fatal(err)
				}
				objs, errs := decode.File("roundtrip.yaml", text)
				if len(errs) > 0 || len(objs) != 1 {
					t.Fatalf("%s's text does not decode: %v\n%s", name, errs, text)
				}
				if diff := cmp.Diff(want.Interface(), objs[0]); diff != "" {
					t.Errorf("%s, decoded again, differs (-want +got):\n%s\n%s", name, diff, text)
				}
			}
		})
	}
}
