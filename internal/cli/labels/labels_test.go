package labels

import (
	"strings"
	"testing"
)

func TestSelector_Matches(t *testing.T) {
	labels := map[string]string{"team": "support", "tier": "b", "empty": ""}
	for _, tt := range []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"team=support", true},
		{"team==support", true},
		{"team = support", true},
		{"team=platform", false},
		{"team!=platform", true},
		{"team!=support", false},
		{"owner!=bob", true}, // absent keys satisfy !=
		{"tier in (a,b)", true},
		{"tier in ( a , c )", false},
		{"tier notin (a,c)", true},
		{"owner notin (a)", true},
		{"tier notin (b)", false},
		{"team", true},
		{"owner", false},
		{"!owner", true},
		{"!team", false},
		{"empty=", true},
		{"team=support,tier=b", true},
		{"team=support, tier=c", false},
		{"team in (support),!owner,tier", true},
		{"example.com/role=x", false},
	} {
		sel, err := Parse(tt.sel)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.sel, err)
			continue
		}
		if got := sel.Matches(labels); got != tt.want {
			t.Errorf("%q matches %v = %v, want %v", tt.sel, labels, got, tt.want)
		}
	}
}

func TestParse_Errors(t *testing.T) {
	for sel, want := range map[string]string{
		"team=a=b":                `at byte 7: unexpected '='`,
		"team in a,b":             "at byte 9: want ( after in or notin",
		"team in (a,b":            "want ) to close the values of \"team\"",
		"team in ()":              "want a value in the set",
		"team like x":             `want =, ==, !=, in or notin after "team"`,
		",team":                   "at byte 1: want a label key",
		"team,":                   "at byte 6: want a label key",
		"!":                       "want a label key",
		"a b":                     "want =, ==, !=, in or notin",
		"team=a)":                 "unexpected ')'",
		strings.Repeat("k", 64):   "longer than 63 characters",
		strings.Repeat("k", 5000): "at most 4096",
	} {
		_, err := Parse(sel)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%.20q) = %v, want an error with %q", sel, err, want)
		}
	}
}
