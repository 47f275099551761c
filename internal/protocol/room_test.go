package protocol

import (
	"strings"
	"testing"
)

func TestValidRoom(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"lobby", true},
		{"a", true},
		{"A-Z_a-z.0-9", true},
		{"...", true},
		{strings.Repeat("r", MaxRoomLen), true},
		{strings.Repeat("r", MaxRoomLen+1), false},
		{"", false},
		{"with space", false},
		{"slash/room", false},
		{"émile", false},
		{"tab\t", false},
		{"quote\"", false},
		{"nul\x00", false},
		{"plus+", false},
		{"colon:", false},
		{":colon", false},
		{":", false},
		{"chat:general", true},
		{"a:b:c", true},
	}
	for _, tt := range tests {
		if got := ValidRoomString(tt.name); got != tt.want {
			t.Errorf("ValidRoomString(%q) = %v, want %v", tt.name, got, tt.want)
		}
		if got := ValidRoom([]byte(tt.name)); got != tt.want {
			t.Errorf("ValidRoom(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestValidRoomEveryByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == '-'
		if got := ValidRoom([]byte{byte(c)}); got != want {
			t.Errorf("ValidRoom(%q) = %v, want %v", byte(c), got, want)
		}
	}
}

func TestValidUser(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"", true}, // names nobody
		{"alice", true},
		{"Zoë Müller", true},
		{"名前", true},
		{strings.Repeat("n", 64), true},
		{strings.Repeat("n", 65), false},
		{"a\tb", false},
		{"a\x00b", false},
		{"\xff", false},
		{"a\u0085b", false}, // a C1 control
		{"a\x7fb", false},   // DEL
		{"\u0007\n", false},
		{"a b", true},
		{" ann", false},
		{"ann ", false},
		{"ann\u00a0", false},    // a no-break space at the end
		{"\u202eann", false},    // right-to-left override
		{"a\u202ab", false},     // left-to-right embedding
		{"a\u2066b", false},     // left-to-right isolate
		{"a\u2069b", false},     // pop directional isolate
		{"a\u200eb", false},     // left-to-right mark
		{"a\u061cb", false},     // Arabic letter mark
		{"a\u200bb", false},     // zero-width space
		{"a\u200cb", false},     // zero-width non-joiner
		{"a\u200db", false},     // zero-width joiner
		{"a\u2060b", false},     // word joiner
		{"\ufeffann", false},    // byte order mark
		{"a\u00adb", false},     // soft hyphen
		{"a\U000e0041b", false}, // a tag character
		{"a\u2028b", false},     // line separator
		{"a\u2029b", false},     // paragraph separator
		{"😀", true},
		{"עברית", true}, // right-to-left script itself is fine: only invisible reordering is refused
		{strings.Repeat("é", 32), true},
		{strings.Repeat("é", 32) + "e", false}, // 65 bytes
	} {
		if got := ValidUser(c.name); got != c.ok {
			t.Errorf("ValidUser(%q) = %v, want %v", c.name, got, c.ok)
		}
	}
}
