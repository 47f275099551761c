//go:build !race

package ws

import (
	"bytes"
	"testing"
)

// The race detector's instrumentation allocates on its own: these run
// without it (scripts/test.sh runs the allocation tests in a step of their
// own).

// TestAllocsReader pins what docs/architecture.md says of reads: frames are
// cut and unmasked in place (only a message in fragments is copied out):
// a whole frame, a control frame and a frame that came in two reads cost
// no allocation.
func TestAllocsReader(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	mkey := [4]byte{0x11, 0x22, 0x33, 0x44}
	whole := AppendMaskedFrame(nil, OpText, true, chatPayload, mkey)
	ping := AppendMaskedFrame(nil, OpPing, true, []byte("are you there"), mkey)
	var r Reader
	buf := make([]byte, 0, 4096)
	tests := []struct {
		name  string
		input []byte
		cut   int // the first read ends here (0: one read)
		want  float64
	}{
		{"whole text frame", whole, 0, 0},
		{"ping", ping, 0, 0},
		{"text frame in two reads", whole, 50, 0},
	}
	for _, tt := range tests {
		got := testing.AllocsPerRun(100, func() {
			if tt.cut > 0 {
				buf = append(buf[:0], tt.input[:tt.cut]...)
				if _, n, _, err := r.Next(buf, ServerSide, 1<<20); n != 0 || err != nil {
					t.Fatalf("%s: first read used %d bytes, err %v", tt.name, n, err)
				}
			}
			// The second read: the bytes of the first, unmasked in place
			// by now, and the rest.
			buf = append(buf[:tt.cut], tt.input[tt.cut:]...)
			var f Frame
			for data := buf; len(data) > 0; {
				var n int
				var err error
				f, n, _, err = r.Next(data, ServerSide, 1<<20)
				if err != nil || n == 0 {
					t.Fatalf("%s: used %d bytes, err %v", tt.name, n, err)
				}
				data = data[n:]
			}
			if f.OpCode == 0 || tt.input[0]&0x0f == byte(OpText) && !bytes.Equal(f.Payload, chatPayload) {
				t.Fatalf("%s: got %v %q", tt.name, f.OpCode, f.Payload)
			}
		})
		if got != tt.want {
			t.Errorf("%s: %v allocations per frame, want %v", tt.name, got, tt.want)
		}
	}
}
