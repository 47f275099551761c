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
	} {
		if got := ValidUser(c.name); got != c.ok {
			t.Errorf("ValidUser(%q) = %v, want %v", c.name, got, c.ok)
		}
	}
}
