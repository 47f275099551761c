package ws

import (
	"bytes"
	"testing"
)

// FuzzParseHeader checks that ParseHeader never panics, never claims more
// bytes than it has, agrees with github.com/gobwas/ws (which also reads
// lengths that are not minimally encoded: ParseHeader refuses them), and that
// AppendHeader gives back the bytes of every header it reads.
//
// CI: go test -run '^$' -fuzz '^FuzzParseHeader$' -fuzztime 30s ./internal/ws
func FuzzParseHeader(f *testing.F) {
	for _, b := range [][]byte{
		{0x81, 0x05},
		{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d},
		{0x82, 0x7e, 0x01, 0x00},
		{0x82, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4},
		{0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0x81, 0x7e, 0x00, 0x05},
		{0x81, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4},
		{0x88},
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := ParseHeader(b)
		compareWithGobwas(t, b)
		if err != nil || n == 0 {
			return
		}
		if n > len(b) || n > MaxHeaderSize || h.Length < 0 || h.Rsv > 7 || h.OpCode > 0xf {
			t.Fatalf("% x: ParseHeader = %+v, %d", b, h, n)
		}
		// Only minimal length encodings are read: a header read is the one
		// AppendHeader writes, and it survives a round trip.
		if enc := AppendHeader(nil, h); !bytes.Equal(enc, b[:n]) {
			t.Fatalf("% x: AppendHeader(ParseHeader) = % x", b[:n], enc)
		}
		h2, n2, err := ParseHeader(AppendHeader(nil, h))
		if err != nil || h2 != h || n2 != HeaderSize(int(h.Length), h.Masked) {
			t.Fatalf("% x: round trip gives %+v, %d, %v, want %+v", b[:n], h2, n2, err, h)
		}
	})
}
