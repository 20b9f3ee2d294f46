package rollout

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// MaxRevisions is how many revisions of each object are kept: the oldest
// goes when an eleventh is recorded.
const MaxRevisions = 10

// Revision is one definition an object had: its number (1 for the first,
// growing by one with each new definition, as a Deployment's revisions
// do), the generation it was recorded at, a digest of the definition, why
// it changed, when it was recorded and the definition itself (the spec,
// as JSON, without what [Definition] leaves out).
type Revision struct {
	Number      int64           `json:"revision"`
	Generation  int64           `json:"generation,omitempty"`
	Hash        string          `json:"hash"`
	ChangeCause string          `json:"changeCause,omitempty"`
	Time        time.Time       `json:"time"`
	Spec        json.RawMessage `json:"spec"`
}

// Halt is a Profile's rollout stopped by a replacement that did not become
// Ready: the rollout's target ([Target]) it stopped on, the member and why.
// It holds until `fleetd rollout resume` (or undo) clears it; a later
// change of the profile starts a new rollout, which it does not stop.
type Halt struct {
	Target   string    `json:"target"`
	Revision int64     `json:"revision,omitempty"`
	Member   string    `json:"member"`
	Message  string    `json:"message"`
	Time     time.Time `json:"time"`
}

// History is what is kept of one Profile or Member: the object's uid (an
// object deleted and declared again under its name is another object, and
// starts a new history), its last [MaxRevisions] revisions, oldest first,
// and, for a Profile, its stopped rollout.
type History struct {
	UID       string     `json:"uid,omitempty"`
	Revisions []Revision `json:"revisions,omitempty"`
	Halt      *Halt      `json:"halt,omitempty"`
}

// IsZero reports whether h keeps nothing (a store deletes it).
func (h History) IsZero() bool { return h.UID == "" && len(h.Revisions) == 0 && h.Halt == nil }

// Latest is the current revision: the last recorded.
func (h History) Latest() (Revision, bool) {
	if len(h.Revisions) == 0 {
		return Revision{}, false
	}
	return h.Revisions[len(h.Revisions)-1], true
}

// Find returns revision number n.
func (h History) Find(n int64) (Revision, bool) {
	for _, r := range h.Revisions {
		if r.Number == n {
			return r, true
		}
	}
	return Revision{}, false
}

// Previous is the revision before the current one: what `fleetd rollout
// undo` goes back to without --to-revision.
func (h History) Previous() (Revision, bool) {
	if len(h.Revisions) < 2 {
		return Revision{}, false
	}
	return h.Revisions[len(h.Revisions)-2], true
}

// Clone returns a copy of h that shares nothing h can change.
func (h History) Clone() History {
	out := h
	out.Revisions = slices.Clone(h.Revisions)
	if h.Halt != nil {
		halt := *h.Halt
		out.Halt = &halt
	}
	return out
}

// Record makes obj's current definition h's current revision and reports
// whether h changed. A definition already current changes nothing (its
// generation is noted); one that an older revision holds becomes current
// under the next number, keeping its change cause, as `kubectl rollout
// undo` renumbers the revision it goes back to; any other is a new
// revision whose change cause is obj's [v1alpha1.AnnotationChangeCause]
// (unless the current revision has it already: it is left over from that
// change), else the spec fields that changed. Only the last [MaxRevisions] are
// kept. Another uid than h's starts a new history. A generation older than
// the current revision's is a late sight of a change already recorded
// (another node of a fleet saw the later one first) and changes nothing:
// recorded, it would make an old definition current again.
func (h *History) Record(obj v1alpha1.Object, now time.Time) (bool, error) {
	spec, hash, err := Definition(obj)
	if err != nil {
		return false, err
	}
	meta := obj.GetMeta()
	if h.UID != meta.UID {
		*h = History{UID: meta.UID}
	}
	latest, ok := h.Latest()
	if ok && meta.Generation > 0 && meta.Generation < latest.Generation {
		return false, nil
	}
	if ok && latest.Hash == hash {
		if latest.Generation == meta.Generation {
			return false, nil
		}
		h.Revisions[len(h.Revisions)-1].Generation = meta.Generation
		return true, nil
	}
	rev := Revision{Number: latest.Number + 1, Generation: meta.Generation, Hash: hash, Time: now.UTC(), Spec: spec}
	// The annotation is the cause of the change that set it: one left
	// over from an earlier change (an undo writes the spec alone) is not.
	if cause := meta.Annotations[v1alpha1.AnnotationChangeCause]; cause != latest.ChangeCause {
		rev.ChangeCause = cause
	}
	if i := slices.IndexFunc(h.Revisions, func(r Revision) bool { return r.Hash == hash }); i >= 0 {
		if rev.ChangeCause == "" {
			rev.ChangeCause = h.Revisions[i].ChangeCause
		}
		h.Revisions = slices.Delete(h.Revisions, i, i+1)
	} else if rev.ChangeCause == "" {
		rev.ChangeCause = changes(latest.Spec, spec)
	}
	h.Revisions = append(h.Revisions, rev)
	if n := len(h.Revisions); n > MaxRevisions {
		h.Revisions = slices.Delete(h.Revisions, 0, n-MaxRevisions)
	}
	return true, nil
}

// Definition is what a revision of obj keeps, as JSON, and its digest: a
// Profile's spec without spec.rollout (how it rolls out is not what it
// runs, and `rollout pause` must not make a revision), a Member's spec
// without spec.paused (likewise); labels, annotations and status are not
// in it.
func Definition(obj v1alpha1.Object) (spec json.RawMessage, hash string, err error) {
	var v any
	switch o := obj.(type) {
	case *v1alpha1.Profile:
		s := o.Spec
		s.Rollout = nil
		v = s
	case *v1alpha1.Member:
		s := o.Spec
		s.Paused = false
		v = s
	default:
		return nil, "", fmt.Errorf("%s has no revisions: only Profiles and Members do", obj.GetObjectKind())
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, "", fmt.Errorf("encode the spec of %s/%s: %w", strings.ToLower(obj.GetObjectKind()), obj.GetName(), err)
	}
	return data, digest(data), nil
}

// Restore returns a copy of obj with the spec revision rev holds: what
// `fleetd rollout undo` writes back. What a revision leaves out (a
// Profile's spec.rollout, a Member's spec.paused) stays as obj has it.
func Restore(obj v1alpha1.Object, rev Revision) (v1alpha1.Object, error) {
	dec := func(into any) error {
		d := json.NewDecoder(bytes.NewReader(rev.Spec))
		d.DisallowUnknownFields()
		if err := d.Decode(into); err != nil {
			return fmt.Errorf("revision %d of %s/%s does not decode: %w", rev.Number, strings.ToLower(obj.GetObjectKind()), obj.GetName(), err)
		}
		return nil
	}
	switch o := obj.(type) {
	case *v1alpha1.Profile:
		out := o.DeepCopy()
		out.Spec = v1alpha1.ProfileSpec{}
		if err := dec(&out.Spec); err != nil {
			return nil, err
		}
		out.Spec.Rollout = o.Spec.Rollout.DeepCopy()
		out.Status = v1alpha1.ProfileStatus{}
		return out, nil
	case *v1alpha1.Member:
		out := o.DeepCopy()
		out.Spec = v1alpha1.MemberSpec{}
		if err := dec(&out.Spec); err != nil {
			return nil, err
		}
		out.Spec.Paused = o.Spec.Paused
		out.Status = v1alpha1.MemberStatus{}
		return out, nil
	}
	return nil, fmt.Errorf("%s has no revisions: only Profiles and Members do", obj.GetObjectKind())
}

// changes names the spec fields that differ between two definitions, for a
// revision's change cause: "spec.args, spec.env changed"; "created" for
// the first.
func changes(prev, next json.RawMessage) string {
	if prev == nil {
		return "created"
	}
	var a, b map[string]json.RawMessage
	if json.Unmarshal(prev, &a) != nil || json.Unmarshal(next, &b) != nil {
		return "spec changed"
	}
	var fields []string
	for k, v := range b {
		if !bytes.Equal(a[k], v) {
			fields = append(fields, "spec."+k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			fields = append(fields, "spec."+k)
		}
	}
	if len(fields) == 0 {
		return "spec changed"
	}
	slices.Sort(fields)
	return strings.Join(fields, ", ") + " changed"
}

// digest is a short hex digest of data.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}
