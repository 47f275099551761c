package ws

import (
	"testing"
	"unicode/utf8"
)

func TestUTF8State(t *testing.T) {
	for _, tt := range []struct {
		in       string
		ok, done bool
	}{
		{"", true, true},
		{"hello, world and more ascii", true, true},
		{"é€😀κόσμε", true, true},
		{"a\xc3", true, false},        // é cut after its lead byte
		{"a\xe2\x82", true, false},    // € cut after two bytes
		{"\xf0\x9f\x98", true, false}, // 😀 cut after three bytes
		{"a\xc3(", false, false},      // a lead byte followed by ASCII
		{"\xf4\x90", false, false},    // above U+10FFFF already
		{"\xed\xa0", false, false},    // a surrogate already
		{"\xe0\x80", false, false},    // an overlong form already
		{"\xc0", false, false},        // never a lead byte
		{"\xf5", false, false},        // never a lead byte
		{"\x80", false, false},        // a continuation byte alone
		{"κόσμε\xf4\x90\x80\x80", false, false},
	} {
		s, ok := utf8State(0).feed([]byte(tt.in))
		if ok != tt.ok || ok && s.complete() != tt.done {
			t.Errorf("feed(%q) = %v, complete %v; want %v, %v", tt.in, ok, s.complete(), tt.ok, tt.done)
		}
	}
}

// Fed in pieces cut anywhere, the check agrees with utf8.Valid on the
// whole, and refuses an invalid text no later than the piece that holds
// its first invalid byte.
func FuzzUTF8State(f *testing.F) {
	for _, s := range []string{"κόσμε", "\xf4\x90\x80\x80", "a\xed\xa0\x80b", "😀é€ plain ascii text", "\xc3("} {
		f.Add([]byte(s), uint8(2), uint8(5))
	}
	f.Fuzz(func(t *testing.T, b []byte, c1, c2 uint8) {
		cuts := []int{min(int(c1), len(b)), min(int(c1)+int(c2), len(b)), len(b)}
		var s utf8State
		prev, ok := 0, true
		for _, c := range cuts {
			if s, ok = s.feed(b[prev:c]); !ok {
				if utf8.Valid(b) {
					t.Fatalf("%q refused in piece %d:%d although valid", b, prev, c)
				}
				// Nothing before the piece was invalid by itself.
				return
			}
			prev = c
		}
		if valid := utf8.Valid(b); s.complete() != valid {
			t.Fatalf("%q: complete %v, utf8.Valid %v", b, s.complete(), valid)
		}
	})
}

func BenchmarkUTF8State(b *testing.B) {
	text := []byte(`{"room":"r1","seq":12,"text":"` + string(make([]byte, 0, 256)) + `hello, world κόσμε","sender":"bob"}`)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := utf8State(0).feed(text); !ok {
			b.Fatal("invalid")
		}
	}
}
