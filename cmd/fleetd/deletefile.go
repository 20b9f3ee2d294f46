package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/cli/client"
	"github.com/fleetd-dev/fleetd/internal/cli/manifests"
	"github.com/fleetd-dev/fleetd/mcp"
)

// deleteFiles is `fleetd delete -f`: DELETE /members/NAME, /profiles/NAME
// or /tenants/NAME for every object the files define (a Member with
// --now closed at once, as `delete member --now`), the Members first
// and then the Tenants and Profiles (manifests.ForDelete), each kind in
// file order — so that a Profile or Tenant is deleted only once the
// Members of the files that reference it are gone (fleetd refuses it while
// a Member references it, and names them). An object fleetd does not have
// is reported (unless --ignore-not-found) and the rest are still deleted;
// any failure makes the exit status 1. Invalid input deletes nothing.
func (o *deleteOptions) deleteFiles(ctx context.Context) error {
	objs, err := o.readObjects(o.files, "delete", "deleted")
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	failed := false
	for _, obj := range manifests.ForDelete(objs) {
		var view mcp.MemberView
		if obj.GetObjectKind() == v1alpha1.KindMember {
			view, err = c.DeleteMember(ctx, obj.GetName(), o.now)
		} else {
			err = c.DeleteObject(ctx, obj.GetObjectKind(), obj.GetName())
		}
		switch {
		case err == nil && obj.GetObjectKind() == v1alpha1.KindMember:
			o.deleted(obj.GetName(), view)
		case err == nil:
			fmt.Fprintf(o.out, "%s deleted\n", kindName(obj))
		case client.IsNotFound(err) && o.ignoreNotFound:
		default:
			o.objectDeleteFailed(obj, err)
			failed = true
		}
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}

// objectDeleteFailed says why obj was not deleted.
func (o *deleteOptions) objectDeleteFailed(obj v1alpha1.Object, err error) {
	if client.IsNotFound(err) {
		fmt.Fprintf(o.errOut, "fleetd delete: %s %q not found\n", strings.ToLower(obj.GetObjectKind()), obj.GetName())
		return
	}
	fmt.Fprintf(o.errOut, "fleetd delete: %s: %s\n", kindName(obj), client.ErrorText(err))
}
