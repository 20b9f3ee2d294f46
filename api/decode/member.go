package decode

import (
	"fmt"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Member decodes data, read from path, like [File] and wants exactly one
// object in it, a Member: the body a caller writes a member with (POST
// /members, bridge_spawn, the console's apply). What [File] finds wrong is
// returned as its [ErrorList]; another count of objects, or another kind,
// as a plain error.
func Member(path string, data []byte) (*v1alpha1.Member, error) {
	objs, errs := File(path, data)
	if len(errs) > 0 {
		return nil, errs
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("want exactly one Member, got %d objects", len(objs))
	}
	m, ok := objs[0].(*v1alpha1.Member)
	if !ok {
		return nil, fmt.Errorf("kind: want Member, got %s; Profiles and Tenants are written with POST /profiles and /tenants, or fleetd apply", objs[0].GetObjectKind())
	}
	return m, nil
}
