package herdrsim

import "testing"

func TestEncodeNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    int
		want string
	}{
		{1, "1"}, {9, "9"}, {10, "A"}, {18, "J"}, {19, "K"}, {31, "Z"}, {32, "0"},
		{33, "11"}, {64, "10"}, {65, "21"}, {32*32 + 32, "00"}, {32*32 + 33, "111"},
	}
	for _, tt := range tests {
		if got := encodeNumber(tt.n); got != tt.want {
			t.Errorf("encodeNumber(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	seen := map[string]int{}
	for n := 1; n <= 5000; n++ {
		s := encodeNumber(n)
		if m, dup := seen[s]; dup {
			t.Fatalf("encodeNumber(%d) = encodeNumber(%d) = %q", n, m, s)
		}
		seen[s] = n
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"claude": "claude", "--model=x": "--model=x", "a b": "'a b'", "it's": `'it'\''s'`, "": "''"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
