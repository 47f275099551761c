package ws

import "testing"

func TestAcceptKey(t *testing.T) {
	tests := []struct{ key, want string }{
		{"dGhlIHNhbXBsZSBub25jZQ==", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="}, // RFC 6455 section 1.3
		{"x3JJHMbDL1EzLkh9GBhXDw==", "HSmrc0sMlYUkAGmm5OPpG2HaGWk="}, // RFC 6455 section 1.2
		{"AQIDBAUGBwgJCgsMDQ4PEC==", "OfS0wDaT5NoxF2gqm7Zj2YtetzM="}, // computed with Python hashlib
	}
	for _, tt := range tests {
		if got := AcceptKey(tt.key); got != tt.want {
			t.Errorf("AcceptKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestValidClientKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"dGhlIHNhbXBsZSBub25jZQ==", true},
		{"x3JJHMbDL1EzLkh9GBhXDw==", true},
		{"AAAAAAAAAAAAAAAAAAAAAA==", true},
		{"", false},
		{"dGhlIHNhbXBsZSBub25jZQ=", false},          // 23 characters
		{"dGhlIHNhbXBsZSBub25jZQ===", false},        // 25 characters
		{"dGhlIHNhbXBsZSBub25jZQ", false},           // unpadded
		{"dGhlIHNhbXBsZSBub25jZSE=", false},         // 17 bytes
		{"dGhlIHNhbXBsZSBub25jZSEhIQ==", false},     // 19 bytes
		{"dGhlIHNhbXBsZSBub25j!Q==", false},         // not base64
		{"dGhlIHNhbXBsZSBub25jZQ-_", false},         // URL alphabet
		{"dGhlIHNhbXBsZSBub25j\r\nQ=", false},       // newlines are not skipped into a valid key
		{"dGhlIHNhbXBsZSBub25jZQ==\x00", false},     // trailing NUL
		{"ZGF0YWRhdGFkYXRhZGF0YWRhdGFkYXRh", false}, // 24 bytes
	}
	for _, tt := range tests {
		if got := ValidClientKey(tt.key); got != tt.want {
			t.Errorf("ValidClientKey(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}
