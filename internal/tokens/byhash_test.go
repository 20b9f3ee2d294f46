package tokens

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"
)

// A byHash answers as a map of its hashes would: set replaces the holder
// of a hash, remove forgets it, get finds the last set, whatever the order
// of the changes; and its hashes stay sorted.
func TestByHash_AnswersAsAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 26))
	sums := make([][sha256.Size]byte, 40)
	for i := range sums {
		sums[i] = sha256.Sum256(fmt.Appendf(nil, "token-%d", i))
	}
	var b byHash
	want := map[[sha256.Size]byte]*holder{}
	for i := range 3000 {
		sum := sums[r.IntN(len(sums))]
		if r.IntN(3) > 0 {
			h := &holder{member: fmt.Sprint(i)}
			b.set(sum, h)
			want[sum] = h
		} else {
			b.remove(sum)
			delete(want, sum)
		}
		if len(b) != len(want) {
			t.Fatalf("step %d: %d entries, want %d", i, len(b), len(want))
		}
		for j := 1; j < len(b); j++ {
			if string(b[j-1].sum[:]) >= string(b[j].sum[:]) {
				t.Fatalf("step %d: entries not sorted at %d", i, j)
			}
		}
		for _, sum := range sums {
			if b.get(sum) != want[sum] {
				t.Fatalf("step %d: get(%x) = %v, want %v", i, sum[:4], b.get(sum), want[sum])
			}
		}
	}
}

// What Resolve's lookup, and a Mint's new token then its revocation, cost
// with 1000 and 10000 tokens handed out.
func BenchmarkByHash(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		var x byHash
		for i := range n {
			x.set(sha256.Sum256(fmt.Appendf(nil, "token-%d", i)), &holder{})
		}
		sum := sha256.Sum256(fmt.Appendf(nil, "token-%d", n/2))
		b.Run(fmt.Sprintf("tokens=%d/get", n), func(b *testing.B) {
			for b.Loop() {
				if x.get(sum) == nil {
					b.Fatal("not found")
				}
			}
		})
		fresh := sha256.Sum256([]byte("fresh"))
		b.Run(fmt.Sprintf("tokens=%d/set-and-remove", n), func(b *testing.B) {
			for b.Loop() {
				x.set(fresh, &holder{})
				x.remove(fresh)
			}
		})
	}
}
