package room

import "slices"

// maxSmall is the largest buffer Go's allocator serves from a size class;
// larger ones are rounded up to whole pages.
const maxSmall = 32 << 10

// sizeClasses maps a buffer's length, in steps of 8 bytes (every size class
// is a multiple of 8), to the capacity the allocator gives it. It is made
// once at start from what the allocator really does (a buffer grown by
// slices.Grow has its size class as capacity), so it follows the runtime
// it is built with rather than a copy of its table; read only after.
var sizeClasses = buildSizeClasses()

func buildSizeClasses() []uint16 {
	t := make([]uint16, maxSmall/8+1)
	for n := 1; n <= maxSmall; {
		c := cap(slices.Grow([]byte(nil), n))
		for ; n <= c && n <= maxSmall; n++ {
			t[(n+7)/8] = uint16(min(c, maxSmall))
		}
	}
	return t
}

// sizeClass returns the capacity the allocator gives a buffer of n bytes,
// so that make([]byte, 0, sizeClass(n)) has no spare capacity it did not
// ask for: one call to the allocator, without slices.Grow's growslice and
// the clearing of its new bytes, which cost a publish ~100 instructions.
func sizeClass(n int) int {
	if n <= 0 {
		return 0
	}
	if n > maxSmall {
		return cap(slices.Grow([]byte(nil), n))
	}
	return int(sizeClasses[(n+7)/8])
}
