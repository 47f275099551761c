package ws

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStatusCodeValidOnWire(t *testing.T) {
	valid := []StatusCode{1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999}
	invalid := []StatusCode{0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535}
	for _, c := range valid {
		if !c.ValidOnWire() {
			t.Errorf("%d.ValidOnWire() = false", c)
		}
	}
	for _, c := range invalid {
		if c.ValidOnWire() {
			t.Errorf("%d.ValidOnWire() = true", c)
		}
	}
}

func TestParseClosePayload(t *testing.T) {
	tests := []struct {
		name   string
		p      []byte
		code   StatusCode
		reason string
		err    error
	}{
		{"empty", nil, CloseNoStatus, "", nil},
		{"one byte", []byte{0x03}, 0, "", ErrCloseLength},
		{"normal", []byte{0x03, 0xe8}, CloseNormal, "", nil},
		{"going away with reason", append([]byte{0x03, 0xe9}, "bye"...), CloseGoingAway, "bye", nil},
		{"UTF-8 reason", append([]byte{0x03, 0xe8}, "au revoir, élan 😀"...), CloseNormal, "au revoir, élan 😀", nil},
		{"private code", []byte{0x0f, 0xa0}, 4000, "", nil},
		{"1005 on the wire", []byte{0x03, 0xed}, 1005, "", ErrCloseCode},
		{"1006 on the wire", []byte{0x03, 0xee}, 1006, "", ErrCloseCode},
		{"code 0", []byte{0, 0}, 0, "", ErrCloseCode},
		{"code 5000", []byte{0x13, 0x88}, 5000, "", ErrCloseCode},
		{"invalid UTF-8 reason", []byte{0x03, 0xe8, 0xff}, CloseNormal, "", ErrCloseReason},
		{"truncated UTF-8 reason", append([]byte{0x03, 0xe8}, "é"[:1]...), CloseNormal, "", ErrCloseReason},
		{"surrogate in reason", []byte{0x03, 0xe8, 0xed, 0xa0, 0x80}, CloseNormal, "", ErrCloseReason},
	}
	for _, tt := range tests {
		code, reason, err := ParseClosePayload(tt.p)
		if code != tt.code || string(reason) != tt.reason || err != tt.err {
			t.Errorf("%s: ParseClosePayload(% x) = %d, %q, %v, want %d, %q, %v", tt.name, tt.p, code, reason, err, tt.code, tt.reason, tt.err)
		}
	}
}

func TestCloseReply(t *testing.T) {
	tests := []struct {
		name        string
		p           []byte
		reply, code StatusCode
		err         error
	}{
		{"no code", nil, CloseNormal, CloseNoStatus, nil},
		{"normal", []byte{0x03, 0xe8}, CloseNormal, CloseNormal, nil},
		{"going away", append([]byte{0x03, 0xe9}, "bye"...), CloseGoingAway, CloseGoingAway, nil},
		{"private code", []byte{0x0f, 0xa0}, 4000, 4000, nil},
		{"one byte", []byte{0x03}, CloseProtocolError, 0, ErrCloseLength},
		{"code no peer sends", []byte{0x03, 0xed}, CloseProtocolError, CloseNoStatus, ErrCloseCode},
		{"reason not UTF-8", []byte{0x03, 0xe8, 0xce, 0xba, 0xe1, 0xbd}, CloseInvalidPayload, CloseNormal, ErrCloseReason},
	}
	for _, tt := range tests {
		reply, code, err := CloseReply(tt.p)
		if reply != tt.reply || code != tt.code || err != tt.err {
			t.Errorf("%s: CloseReply(% x) = %d, %d, %v, want %d, %d, %v", tt.name, tt.p, reply, code, err, tt.reply, tt.code, tt.err)
		}
	}
}

func TestAppendClosePayload(t *testing.T) {
	tests := []struct {
		name   string
		code   StatusCode
		reason string
		want   string // the reason that fits
	}{
		{"no reason", CloseGoingAway, "", ""},
		{"short", CloseTryAgainLater, "slow consumer", "slow consumer"},
		{"exactly 123 bytes", CloseNormal, strings.Repeat("a", 123), strings.Repeat("a", 123)},
		{"124 bytes cut", CloseNormal, strings.Repeat("a", 124), strings.Repeat("a", 123)},
		{"cut on a rune boundary", CloseNormal, strings.Repeat("a", 122) + "é", strings.Repeat("a", 122)},
		{"4-byte runes cut whole", ClosePolicyViolation, strings.Repeat("😀", 40), strings.Repeat("😀", 30)},
	}
	for _, tt := range tests {
		p := AppendClosePayload([]byte("x"), tt.code, tt.reason)[1:]
		if len(p) > MaxControlPayload {
			t.Errorf("%s: payload of %d bytes", tt.name, len(p))
		}
		code, reason, err := ParseClosePayload(p)
		if err != nil || code != tt.code || string(reason) != tt.want {
			t.Errorf("%s: round trip = %d, %q, %v, want %d, %q", tt.name, code, reason, err, tt.code, tt.want)
		}
	}
}

func TestAppendCloseFrame(t *testing.T) {
	for _, reason := range []string{"", "shutting down", strings.Repeat("ü", 100)} {
		b := AppendCloseFrame(nil, CloseGoingAway, reason)
		h, n, err := ParseHeader(b)
		if err != nil || n == 0 {
			t.Fatalf("ParseHeader = %d, %v", n, err)
		}
		if err := h.Validate(false); err != nil || h.OpCode != OpClose || int(h.Length) != len(b)-n {
			t.Fatalf("header %+v (%v) for a frame of %d bytes", h, err, len(b))
		}
		code, got, err := ParseClosePayload(b[n:])
		if err != nil || code != CloseGoingAway || !utf8.Valid(got) || !strings.HasPrefix(reason, string(got)) {
			t.Fatalf("payload = %d, %q, %v", code, got, err)
		}
		if len(reason) <= MaxControlPayload-2 && !bytes.Equal(got, []byte(reason)) {
			t.Fatalf("reason %q, want %q", got, reason)
		}
	}
}
