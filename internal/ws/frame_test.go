package ws

import (
	"bytes"
	"math"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	tests := []struct {
		name string
		h    Header
		want []byte // the encoding; nil to check the round trip only
	}{
		{"empty text", Header{Fin: true, OpCode: OpText}, []byte{0x81, 0x00}},
		{"RFC 6455 5.7 unmasked Hello", Header{Fin: true, OpCode: OpText, Length: 5}, []byte{0x81, 0x05}},
		{"RFC 6455 5.7 masked Hello", Header{Fin: true, OpCode: OpText, Masked: true, Mask: key, Length: 5}, []byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d}},
		{"RFC 6455 5.7 first fragment", Header{OpCode: OpText, Length: 3}, []byte{0x01, 0x03}},
		{"RFC 6455 5.7 last fragment", Header{Fin: true, OpCode: OpContinuation, Length: 2}, []byte{0x80, 0x02}},
		{"RFC 6455 5.7 ping", Header{Fin: true, OpCode: OpPing, Length: 5}, []byte{0x89, 0x05}},
		{"RFC 6455 5.7 256 bytes binary", Header{Fin: true, OpCode: OpBinary, Length: 256}, []byte{0x82, 0x7e, 0x01, 0x00}},
		{"RFC 6455 5.7 64 KiB binary", Header{Fin: true, OpCode: OpBinary, Length: 65536}, []byte{0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0}},
		{"125 in 7 bits", Header{Fin: true, OpCode: OpClose, Length: 125}, []byte{0x88, 0x7d}},
		{"126 in 16 bits", Header{Fin: true, OpCode: OpText, Length: 126}, []byte{0x81, 0x7e, 0x00, 0x7e}},
		{"127 in 16 bits", Header{Fin: true, OpCode: OpText, Length: 127}, []byte{0x81, 0x7e, 0x00, 0x7f}},
		{"65535 in 16 bits", Header{Fin: true, OpCode: OpText, Length: 65535}, []byte{0x81, 0x7e, 0xff, 0xff}},
		{"65536 masked in 64 bits", Header{Fin: true, OpCode: OpText, Masked: true, Mask: key, Length: 65536},
			[]byte{0x81, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 0x37, 0xfa, 0x21, 0x3d}},
		{"4 GiB", Header{Fin: true, OpCode: OpBinary, Length: 1 << 32}, []byte{0x82, 0x7f, 0, 0, 0, 1, 0, 0, 0, 0}},
		{"largest length", Header{Fin: true, OpCode: OpBinary, Length: math.MaxInt64}, []byte{0x82, 0x7f, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"all RSV bits", Header{Fin: true, Rsv: 7, OpCode: OpText, Length: 1}, []byte{0xf1, 0x01}},
		{"RSV1", Header{Rsv: 4, OpCode: OpBinary, Length: 1}, []byte{0x42, 0x01}},
		{"reserved opcode", Header{Fin: true, OpCode: 0xb}, []byte{0x8b, 0x00}},
		{"masked zero length", Header{Fin: true, OpCode: OpPong, Masked: true, Mask: [4]byte{1, 2, 3, 4}}, []byte{0x8a, 0x80, 1, 2, 3, 4}},
		{"masked 126", Header{Fin: true, OpCode: OpText, Masked: true, Mask: key, Length: 126}, nil},
		{"masked 65535", Header{Fin: true, OpCode: OpText, Masked: true, Mask: key, Length: 65535}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendHeader([]byte("xx"), tt.h)[2:]
			if tt.want != nil && !bytes.Equal(b, tt.want) {
				t.Fatalf("AppendHeader = % x, want % x", b, tt.want)
			}
			if size := HeaderSize(int(tt.h.Length), tt.h.Masked); size != len(b) {
				t.Errorf("HeaderSize = %d, encoding has %d bytes", size, len(b))
			}
			h, n, err := ParseHeader(append(b, "payload"...))
			if err != nil || n != len(b) {
				t.Fatalf("ParseHeader = %d, %v, want %d, nil", n, err, len(b))
			}
			if h != tt.h {
				t.Fatalf("ParseHeader = %+v, want %+v", h, tt.h)
			}
			// Every prefix is an incomplete header: size 0, no error.
			for i := 0; i < len(b); i++ {
				if _, n, err := ParseHeader(b[:i]); n != 0 || err != nil {
					t.Fatalf("ParseHeader of %d of %d bytes = %d, %v, want 0, nil", i, len(b), n, err)
				}
			}
		})
	}
}

func TestParseHeaderLengthOverflow(t *testing.T) {
	for _, b := range [][]byte{
		{0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0x82, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4},
		{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0}, // the mask is not needed to know
	} {
		if _, n, err := ParseHeader(b); err != ErrLengthOverflow || n != 0 {
			t.Errorf("ParseHeader(% x) = %d, %v, want 0, %v", b, n, err, ErrLengthOverflow)
		}
	}
}

// RFC 6455 section 5.2: "the minimal number of bytes MUST be used to encode
// the length". A longer encoding is refused as soon as its length bytes are
// in, masked or not; the shortest encodings of the boundary lengths pass.
func TestParseHeaderNonMinimalLength(t *testing.T) {
	tests := []struct {
		b       []byte
		want    int64
		wantErr error
	}{
		{[]byte{0x81, 0x7e, 0x00, 0x05}, 0, ErrNonMinimalLength},
		{[]byte{0x81, 0x7e, 0x00, 0x7d}, 0, ErrNonMinimalLength},
		{[]byte{0x81, 0xfe, 0x00, 0x00}, 0, ErrNonMinimalLength}, // the mask is not needed to know
		{[]byte{0x81, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0x05}, 0, ErrNonMinimalLength},
		{[]byte{0x81, 0x7f, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 0, ErrNonMinimalLength},
		{[]byte{0x81, 0xff, 0, 0, 0, 0, 0, 0, 0x01, 0x00}, 0, ErrNonMinimalLength},
		{[]byte{0x81, 0x7d}, 125, nil},
		{[]byte{0x81, 0x7e, 0x00, 0x7e}, 126, nil},
		{[]byte{0x81, 0x7e, 0xff, 0xff}, 65535, nil},
		{[]byte{0x81, 0x7f, 0, 0, 0, 0, 0, 0x01, 0, 0}, 65536, nil},
	}
	for _, tt := range tests {
		h, n, err := ParseHeader(tt.b)
		if tt.wantErr != nil {
			if err != tt.wantErr || n != 0 {
				t.Errorf("ParseHeader(% x) = %d, %v, want 0, %v", tt.b, n, err, tt.wantErr)
			}
			continue
		}
		if err != nil || n != len(tt.b) || h.Length != tt.want {
			t.Errorf("ParseHeader(% x) = length %d, %d, %v, want %d, %d, nil", tt.b, h.Length, n, err, tt.want, len(tt.b))
		}
	}
}

func TestValidate(t *testing.T) {
	masked := func(h Header) Header { h.Masked = true; return h }
	tests := []struct {
		name       string
		h          Header
		fromClient bool
		want       error
	}{
		{"client text", masked(Header{Fin: true, OpCode: OpText, Length: 10}), true, nil},
		{"client fragment", masked(Header{OpCode: OpText, Length: 10}), true, nil},
		{"client continuation", masked(Header{OpCode: OpContinuation}), true, nil},
		{"client binary", masked(Header{Fin: true, OpCode: OpBinary, Length: 1 << 40}), true, nil},
		{"client close 125", masked(Header{Fin: true, OpCode: OpClose, Length: 125}), true, nil},
		{"client ping", masked(Header{Fin: true, OpCode: OpPing}), true, nil},
		{"client pong", masked(Header{Fin: true, OpCode: OpPong, Length: 4}), true, nil},
		{"server text", Header{Fin: true, OpCode: OpText, Length: 10}, false, nil},
		{"server close", Header{Fin: true, OpCode: OpClose, Length: 2}, false, nil},
		{"client unmasked", Header{Fin: true, OpCode: OpText}, true, ErrUnmasked},
		{"server masked", masked(Header{Fin: true, OpCode: OpText}), false, ErrMasked},
		{"RSV1", masked(Header{Fin: true, Rsv: 4, OpCode: OpText}), true, ErrReservedBits},
		{"RSV2", masked(Header{Fin: true, Rsv: 2, OpCode: OpText}), true, ErrReservedBits},
		{"RSV3", masked(Header{Fin: true, Rsv: 1, OpCode: OpText}), true, ErrReservedBits},
		{"RSV before masking", Header{Fin: true, Rsv: 1, OpCode: OpText}, true, ErrReservedBits},
		{"opcode 3", masked(Header{Fin: true, OpCode: 3}), true, ErrReservedOpCode},
		{"opcode 7", masked(Header{Fin: true, OpCode: 7}), true, ErrReservedOpCode},
		{"opcode 0xb", masked(Header{Fin: true, OpCode: 0xb}), true, ErrReservedOpCode},
		{"opcode 0xf", masked(Header{Fin: true, OpCode: 0xf}), true, ErrReservedOpCode},
		{"fragmented close", masked(Header{OpCode: OpClose}), true, ErrFragmentedControl},
		{"fragmented ping", masked(Header{OpCode: OpPing}), true, ErrFragmentedControl},
		{"fragmented pong", Header{OpCode: OpPong}, false, ErrFragmentedControl},
		{"ping 126", masked(Header{Fin: true, OpCode: OpPing, Length: 126}), true, ErrControlTooLong},
		{"close 126", Header{Fin: true, OpCode: OpClose, Length: 126}, false, ErrControlTooLong},
		{"pong 65536", masked(Header{Fin: true, OpCode: OpPong, Length: 65536}), true, ErrControlTooLong},
	}
	for _, tt := range tests {
		if got := tt.h.Validate(tt.fromClient); got != tt.want {
			t.Errorf("%s: Validate(%v) = %v, want %v", tt.name, tt.fromClient, got, tt.want)
		}
	}
}

func TestOpCode(t *testing.T) {
	for op := OpCode(0); op < 16; op++ {
		control := op >= 8
		reserved := !(op <= 2 || op >= 8 && op <= 0xa)
		if op.IsControl() != control {
			t.Errorf("OpCode(%#x).IsControl() = %v", op, op.IsControl())
		}
		if op.IsReserved() != reserved {
			t.Errorf("OpCode(%#x).IsReserved() = %v", op, op.IsReserved())
		}
	}
}

func TestHeaderSize(t *testing.T) {
	tests := []struct {
		length int
		masked bool
		want   int
	}{
		{0, false, 2}, {125, false, 2}, {126, false, 4}, {65535, false, 4}, {65536, false, 10},
		{0, true, 6}, {125, true, 6}, {126, true, 8}, {65535, true, 8}, {65536, true, 14},
		{math.MaxInt64, true, MaxHeaderSize},
	}
	for _, tt := range tests {
		if got := HeaderSize(tt.length, tt.masked); got != tt.want {
			t.Errorf("HeaderSize(%d, %v) = %d, want %d", tt.length, tt.masked, got, tt.want)
		}
	}
}

// maskNaive is RFC 6455 section 5.3 written out.
func maskNaive(b []byte, key [4]byte, pos int) {
	for i := range b {
		b[i] ^= key[(pos+i)%4]
	}
}

func TestMask(t *testing.T) {
	key := [4]byte{0x01, 0x80, 0xfe, 0x5a}
	src := make([]byte, 100)
	for i := range src {
		src[i] = byte(i*37 + 11)
	}
	for length := 0; length <= len(src); length++ {
		for pos := 0; pos < 12; pos++ {
			want := bytes.Clone(src[:length])
			maskNaive(want, key, pos)
			got := bytes.Clone(src[:length])
			if next := Mask(got, key, pos); next != pos+length {
				t.Fatalf("Mask(len %d, pos %d) returned %d, want %d", length, pos, next, pos+length)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Mask(len %d, pos %d) = % x, want % x", length, pos, got, want)
			}
			Mask(got, key, pos)
			if !bytes.Equal(got, src[:length]) {
				t.Fatalf("masking twice (len %d, pos %d) did not restore the data", length, pos)
			}
		}
	}
}

// Masking a payload in pieces, as it arrives, gives the same bytes as
// masking it whole.
func TestMaskInPieces(t *testing.T) {
	key := [4]byte{9, 8, 7, 6}
	src := []byte("The quick brown fox jumps over the lazy dog, twice over, and then some more.")
	want := bytes.Clone(src)
	maskNaive(want, key, 0)
	for cut1 := 0; cut1 <= len(src); cut1++ {
		for _, step := range []int{1, 3, 8, 13} {
			cut2 := min(cut1+step, len(src))
			got := bytes.Clone(src)
			pos := Mask(got[:cut1], key, 0)
			pos = Mask(got[cut1:cut2], key, pos)
			Mask(got[cut2:], key, pos)
			if !bytes.Equal(got, want) {
				t.Fatalf("cuts at %d and %d: % x, want % x", cut1, cut2, got, want)
			}
		}
	}
}

func TestAppendFrame(t *testing.T) {
	payload := bytes.Repeat([]byte("ab"), 100)
	b := AppendFrame([]byte{0xee}, OpText, true, payload)[1:]
	h, n, err := ParseHeader(b)
	if err != nil || n != 4 {
		t.Fatalf("ParseHeader = %d, %v", n, err)
	}
	if want := (Header{Fin: true, OpCode: OpText, Length: int64(len(payload))}); h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	if err := h.Validate(false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[n:], payload) {
		t.Fatal("payload differs")
	}
}

func TestAppendMaskedFrame(t *testing.T) {
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	payload := []byte("Hello")
	b := AppendMaskedFrame(nil, OpText, true, payload, key)
	// RFC 6455 section 5.7: a single-frame masked text message.
	want := []byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58}
	if !bytes.Equal(b, want) {
		t.Fatalf("AppendMaskedFrame = % x, want % x", b, want)
	}
	if string(payload) != "Hello" {
		t.Fatalf("payload modified to %q", payload)
	}
	h, n, err := ParseHeader(b)
	if err != nil || n != 6 || h.Validate(true) != nil {
		t.Fatalf("ParseHeader = %+v, %d, %v", h, n, err)
	}
	Mask(b[n:], h.Mask, 0)
	if string(b[n:]) != "Hello" {
		t.Fatalf("unmasked %q", b[n:])
	}
}
