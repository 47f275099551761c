package ws

import (
	"testing"
	"unicode/utf8"
)

func TestValidPrefix(t *testing.T) {
	for _, tt := range []struct {
		in string
		n  int
		ok bool
	}{
		{"", 0, true},
		{"hello", 5, true},
		{"é", 2, true},
		{"a\xc3", 1, true},        // é cut after its lead byte
		{"a\xe2\x82", 1, true},    // € cut after two bytes
		{"\xf0\x9f\x98", 0, true}, // 😀 cut after three bytes
		{"a\xc3(", 0, false},      // a lead byte followed by ASCII
		{"\xf4\x90", 0, false},    // above U+10FFFF already
		{"\xed\xa0", 0, false},    // a surrogate already
		{"\xe0\x80", 0, false},    // an overlong form already
		{"\xc0", 0, false},        // never a lead byte
		{"\xf5", 0, false},        // never a lead byte
		{"\x80", 0, false},        // a continuation byte alone
		{"ok\xff\xc3", 0, false},  // invalid before an incomplete tail
		{"κόσμε\xf4\x90\x80\x80", 0, false},
		{"\xf0\x9f\x98\x80\xf0", 4, true},
	} {
		n, ok := validPrefix([]byte(tt.in))
		if n != tt.n || ok != tt.ok {
			t.Errorf("validPrefix(%q) = %d, %v; want %d, %v", tt.in, n, ok, tt.n, tt.ok)
		}
	}
}

// Every way of cutting a valid or invalid text in two agrees with
// utf8.Valid on the whole: a valid text is never refused early, and an
// invalid one is refused by the end.
func FuzzValidPrefix(f *testing.F) {
	for _, s := range []string{"κόσμε", "\xf4\x90\x80\x80", "a\xed\xa0\x80b", "😀é€", "\xc3("} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		if cut < 0 || cut > len(b) {
			return
		}
		n, ok := validPrefix(b[:cut])
		if !ok {
			if utf8.Valid(b) {
				t.Fatalf("%q refused at %d although valid", b, cut)
			}
			return
		}
		if n > cut || cut-n > 3 || !utf8.Valid(b[:n]) {
			t.Fatalf("validPrefix(%q) = %d", b[:cut], n)
		}
		whole := utf8.Valid(b[n:]) && utf8.Valid(b[:n])
		if whole != utf8.Valid(b) && utf8.Valid(b) {
			t.Fatalf("%q: the rest after %d does not complete", b, n)
		}
	})
}
