package decode

import (
	"errors"
	"strings"
	"testing"
)

func TestMember(t *testing.T) {
	m, err := Member("member.yaml", []byte(member("profile: claude")))
	if err != nil || m == nil || m.Name != "reviewer" || m.Spec.Profile != "claude" {
		t.Fatalf("Member(one valid Member) = %+v, %v; want reviewer on claude", m, err)
	}
	for _, tt := range []struct {
		name, data, want string
		list             bool // the error is an ErrorList
	}{
		{"invalid", member("profile: claude", "bogus: 1"), "member.yaml:", true},
		{"none", "", "want exactly one Member, got 0 objects", false},
		{"two", member("profile: claude") + "---\n" + member("profile: claude"), "want exactly one Member, got 2 objects", false},
		{"profile", profile("harness: claude"), "kind: want Member, got Profile; Profiles and Tenants are written with POST /profiles and /tenants, or fleetd apply", false},
	} {
		m, err := Member("member.yaml", []byte(tt.data))
		var errs ErrorList
		if m != nil || err == nil || !strings.Contains(err.Error(), tt.want) || errors.As(err, &errs) != tt.list {
			t.Errorf("%s: Member = %v, %v; want no Member and an error with %q (ErrorList %v)", tt.name, m, err, tt.want, tt.list)
		}
	}
}
