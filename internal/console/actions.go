package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/guard"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	desired "github.com/fleetd-dev/fleetd/internal/store"
)

// send is POST /ui/members/{name}/send: the primary's bridge_send without
// waiting. The reply lands in the primary's mailbox, which the page shows
// as it arrives.
func (c *Console) send(_ http.ResponseWriter, r *http.Request) (result, int) {
	name := r.PathValue("name")
	if _, found := c.o.Members.Member(name); !found {
		return fail(http.StatusNotFound, fmt.Sprintf("member %q not found", name))
	}
	text := r.PostFormValue("content")
	if strings.TrimSpace(text) == "" {
		return fail(http.StatusBadRequest, "the task is empty")
	}
	res, err := c.o.Messages.Send(r.Context(), messaging.SendRequest{From: c.o.PrimaryName, To: name, Content: text})
	if err != nil {
		return coreFail(err)
	}
	return result{OK: true, Message: fmt.Sprintf("sent to %s (turn %s); its reply will show here", name, res.TurnID), TurnID: res.TurnID}, http.StatusOK
}

// answer is POST /ui/answer: the primary answers a worker's pending
// question; the core hands it to the worker's held bridge_ask (bridge_send
// with turnId, never through the pane).
func (c *Console) answer(_ http.ResponseWriter, r *http.Request) (result, int) {
	turn, text := r.PostFormValue("turn"), r.PostFormValue("content")
	if turn == "" {
		return fail(http.StatusBadRequest, "no turn named")
	}
	if strings.TrimSpace(text) == "" {
		return fail(http.StatusBadRequest, "the answer is empty")
	}
	res, err := c.o.Messages.Send(r.Context(), messaging.SendRequest{From: c.o.PrimaryName, TurnID: turn, Content: text})
	if err != nil {
		return coreFail(err)
	}
	return ok(fmt.Sprintf("answered %s (turn %s)", res.Worker, res.TurnID))
}

// ack is POST /ui/ack: messages (form field id, repeated) leave the
// primary's mailbox.
func (c *Console) ack(_ http.ResponseWriter, r *http.Request) (result, int) {
	ids := r.PostForm["id"]
	if len(ids) == 0 {
		return fail(http.StatusBadRequest, "no message named")
	}
	n, err := c.o.Messages.Ack(c.o.PrimaryName, ids)
	if err != nil {
		return coreFail(err)
	}
	return ok(fmt.Sprintf("acknowledged %d message(s)", n))
}

func coreFail(err error) (result, int) {
	status := http.StatusBadRequest
	switch messaging.CodeOf(err) {
	case messaging.CodeUnavailable:
		status = http.StatusServiceUnavailable
	case messaging.CodeNotFound:
		status = http.StatusNotFound
	case "":
		status = http.StatusInternalServerError
	}
	return fail(status, err.Error())
}

// pause is POST /ui/members/{name}/pause and /resume: spec.paused set
// through the store, as an edited manifest would.
func (c *Console) pause(paused bool) func(http.ResponseWriter, *http.Request) (result, int) {
	return func(_ http.ResponseWriter, r *http.Request) (result, int) {
		name := r.PathValue("name")
		obj, found := c.o.Store.Get(v1alpha1.KindMember, name)
		if !found {
			return fail(http.StatusNotFound, fmt.Sprintf("member %q not found", name))
		}
		m := obj.(*v1alpha1.Member).DeepCopy()
		word := map[bool]string{true: "paused", false: "resumed"}[paused]
		if m.Spec.Paused == paused {
			return ok(fmt.Sprintf("%s was already %s", name, word))
		}
		m.Spec.Paused = paused
		if err := c.o.Store.Apply(r.Context(), m); err != nil {
			return storeFail("member "+name, err)
		}
		return ok(name + " " + word)
	}
}

func (c *Console) deleteMember(_ http.ResponseWriter, r *http.Request) (result, int) {
	name := r.PathValue("name")
	if err := c.o.Store.Delete(r.Context(), v1alpha1.KindMember, name); err != nil {
		if errors.Is(err, desired.ErrNotFound) {
			return fail(http.StatusNotFound, fmt.Sprintf("member %q not found", name))
		}
		return storeFail("member "+name, err)
	}
	return result{OK: true, Message: name + " deleted", Redirect: "/ui/"}, http.StatusOK
}

// storeFail is a failed write of an object ("member a") as an answer.
func storeFail(what string, err error) (result, int) {
	var errs decode.ErrorList
	if errors.As(err, &errs) {
		return fail(http.StatusUnprocessableEntity, errs.Error())
	}
	return fail(http.StatusServiceUnavailable, fmt.Sprintf("write %s: %v", what, err))
}

// apply is POST /ui/apply: one Member, Profile or Tenant (form field yaml)
// is checked as the REST API (and so `fleetd apply`) checks it, and
// compared with the stored definition. A Member goes through the
// subscription guard on every key and value as written, duplicate keys
// refused, then strict decoding and validation with package decode, as
// `fleetd validate` and the store do, and the Profile and Tenant it names
// must exist. A Profile or Tenant is decoded the same way and held to
// guard.CheckObjectWrite against its stored definition. With dryRun=1
// nothing is written and the diff is returned; otherwise the object is
// written.
func (c *Console) apply(_ http.ResponseWriter, r *http.Request) (result, int) {
	obj, status, err := c.decodeApply([]byte(r.PostFormValue("yaml")))
	if err != nil {
		return fail(status, err.Error())
	}
	kind, name := obj.GetObjectKind(), obj.GetName()
	what := strings.ToLower(kind) + " " + name
	// The diff compares what a user writes (name, labels, annotations,
	// spec) as YAML; no diff against a stored definition is "unchanged".
	before, verb := "", "created"
	if stored, found := c.o.Store.Get(kind, name); found {
		before, verb = specYAML(stored), "configured"
	}
	diff := lineDiff(before, specYAML(obj))
	if before != "" && diff == "" {
		verb = "unchanged"
	}
	if r.PostFormValue("dryRun") == "1" {
		return result{OK: true, Message: fmt.Sprintf("%s would be %s (dry run: nothing written)", what, verb), Diff: diff}, http.StatusOK
	}
	if verb != "unchanged" {
		if err := c.o.Store.Apply(r.Context(), obj); err != nil {
			return storeFail(what, err)
		}
	}
	res := result{OK: true, Message: fmt.Sprintf("%s %s", what, verb), Diff: diff}
	if kind == v1alpha1.KindMember {
		res.Redirect = "/ui/members/" + name
	}
	return res, http.StatusOK
}

// applyFile names the apply form's text in the errors that locate a
// problem in it.
const applyFile = "manifest.yaml"

// decodeApply checks the apply form's text and decodes its one object, or
// says why not with the status to answer.
func (c *Console) decodeApply(data []byte) (v1alpha1.Object, int, error) {
	asJSON, err := sigsyaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, http.StatusUnprocessableEntity, fmt.Errorf("%s: %w", applyFile, err)
	}
	var head struct{ Kind string }
	_ = json.Unmarshal(asJSON, &head) // a body that is no object fails to decode below
	if head.Kind == v1alpha1.KindMember {
		if err := guard.CheckSpawnJSON(asJSON); err != nil {
			if errors.Is(err, guard.ErrSubscriptionBoundary) {
				return nil, http.StatusForbidden, err
			}
			return nil, http.StatusUnprocessableEntity, fmt.Errorf("%s: %w", applyFile, err)
		}
		m, err := decode.Member(applyFile, data)
		if err != nil {
			return nil, http.StatusUnprocessableEntity, err
		}
		for _, ref := range m.References() {
			if _, found := c.o.Store.Get(ref.Kind, ref.Name); !found {
				return nil, http.StatusUnprocessableEntity, fmt.Errorf("%s: no %s named %q", ref.Field, ref.Kind, ref.Name)
			}
		}
		return m, 0, nil
	}
	objs, errs := decode.File(applyFile, data)
	switch {
	case len(errs) > 0:
		return nil, http.StatusUnprocessableEntity, errs
	case len(objs) != 1:
		return nil, http.StatusUnprocessableEntity, fmt.Errorf("%s: want exactly one Member, Profile or Tenant, got %d objects", applyFile, len(objs))
	}
	stored, found := c.o.Store.Get(objs[0].GetObjectKind(), objs[0].GetName())
	if !found {
		stored = nil // a store may answer a nil pointer
	}
	if err := guard.CheckObjectWrite(objs[0], stored, c.o.Store.List(v1alpha1.KindTenant)); err != nil {
		return nil, http.StatusForbidden, err
	}
	return objs[0], 0, nil
}
