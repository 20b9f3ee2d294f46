package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// largestMember builds the largest Member validation lets in: a prompt of
// the content limit and an annotation as long as the object's JSON bound
// allows, every byte of both a '<' (which JSON writes in six bytes), labels
// and a nodeSelector of the longest keys and values, the longest cwd.
func largestMember(t *testing.T) *v1alpha1.Member {
	t.Helper()
	prefix := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	labels := map[string]string{}
	for i := range 8 {
		labels[prefix+"/"+strings.Repeat(string(rune('a'+i)), 63)] = strings.Repeat("v", 63)
	}
	m := &v1alpha1.Member{TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindMember},
		ObjectMeta: v1alpha1.ObjectMeta{Name: strings.Repeat("l", 32), Labels: labels},
		Spec: v1alpha1.MemberSpec{Profile: "claude", Prompt: strings.Repeat("<", v1alpha1.MaxContentBytes),
			Cwd: "/" + strings.Repeat("<", v1alpha1.MaxPathBytes-1), Workspace: strings.Repeat("&", v1alpha1.MaxLabelLength)}}
	m.SetDefaults()
	// The annotation takes what the JSON bound leaves.
	n := v1alpha1.MaxAnnotationsBytes - len("note")
	for {
		m.Annotations = map[string]string{"note": strings.Repeat("<", n)}
		errs := m.Validate()
		if len(errs) == 0 {
			break
		}
		if len(errs) != 1 || !strings.Contains(errs[0].Msg, "bytes of JSON") {
			t.Fatalf("the largest member is invalid: %v", errs)
		}
		n -= 1 << 10
	}
	whole := *m
	whole.Status = v1alpha1.MemberStatus{}
	b, _ := json.Marshal(&whole)
	if len(b) < v1alpha1.MaxObjectJSONBytes-8<<10 {
		t.Fatalf("the largest member is %d bytes of JSON, not near the bound %d", len(b), v1alpha1.MaxObjectJSONBytes)
	}
	return m
}

// TestGet_WatchCarriesTheLargestValidMember: the largest Member validation
// lets in — 3 MiB of JSON — streams through `fleetd get -w` with its
// status, within the watch's 4 MiB event: no stored member can break every
// watcher.
func TestGet_WatchCarriesTheLargestValidMember(t *testing.T) {
	t.Parallel()
	m := largestMember(t)
	doc := map[string]any{"apiVersion": m.APIVersion, "kind": m.Kind, "metadata": map[string]any{"name": m.Name, "labels": m.Labels, "annotations": m.Annotations}, "spec": m.Spec}
	manifest, err := sigsyaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	f := startFleetd(t, map[string]string{"fleet.yaml": getFleet, "largest.yaml": string(manifest)})
	f.waitReady(t, m.Name)

	out := &streamLines{syncbuf.Lines{C: make(chan string, 1024)}}
	var errOut bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(append([]string{"get", "members", "-w", "-o", "jsonpath={.metadata.name} {.status.phase} {.metadata.annotations.note}\n"}, f.client...), out, &errOut)
	}()
	// A bound on a hang, not a speed: the event is 3 MiB of JSON, encoded
	// by fleetd and decoded and printed by the client under -race, 2.6 s
	// on a quiet machine; the whole suite run three times at once took
	// over 30 s.
	deadline := time.After(2 * time.Minute)
	line, _ := out.waitLine(t, deadline, "^"+m.Name+" ")
	if fields := strings.Fields(line); len(fields) != 3 || fields[1] != v1alpha1.PhaseReady || fields[2] != m.Annotations["note"] {
		t.Errorf("the largest member's watch line is %d bytes, want its name, Ready and its whole annotation", len(line))
	}
	f.stop()
	// A deadline of its own: the line's may have passed while fleetd
	// stopped, and a select on two ready channels picks either.
	select {
	case <-exit:
		if strings.Contains(errOut.String(), "longer than") {
			t.Errorf("the watch failed on an event: %s", errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal(errors.New("the watch did not end when fleetd stopped"))
	}
}
