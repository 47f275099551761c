package room

import (
	"slices"
	"testing"
)

// TestSizeClass checks the table against the allocator for every small
// length and a few large ones: a buffer made with sizeClass(n) has the
// capacity slices.Grow would have given it, so the history's cost counts
// what the allocator really handed out.
func TestSizeClass(t *testing.T) {
	check := func(n int) {
		want := cap(slices.Grow([]byte(nil), n))
		if got := sizeClass(n); got != want {
			t.Fatalf("sizeClass(%d) = %d, the allocator gives %d", n, got, want)
		}
		if got := cap(make([]byte, 0, sizeClass(n))); got != want {
			t.Fatalf("make(0, sizeClass(%d)) has capacity %d, want %d", n, got, want)
		}
	}
	for n := 0; n <= maxSmall+1; n++ {
		check(n)
	}
	for _, n := range []int{40000, 65536, 100001} {
		check(n)
	}
}
