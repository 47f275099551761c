package terminal

import (
	"testing"
	"time"

	"github.com/scalechat/scalechat/client"
)

func TestFormat(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 5, 124031000, time.UTC)
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name string
		m    client.Message
		loc  *time.Location
		want string
	}{
		{"server time in UTC", client.Message{ServerAt: at, Sender: "alice", Text: "hello"}, time.UTC, "[10:00:05] alice: hello"},
		{"server time in local zone", client.Message{ServerAt: at, Sender: "alice", Text: "hello"}, paris, "[11:00:05] alice: hello"},
		{"server time wins over sent_at", client.Message{ServerAt: at, SentAt: "2020-01-01T01:02:03Z", Sender: "a", Text: "x"}, time.UTC, "[10:00:05] a: x"},
		{"sent_at without server time", client.Message{SentAt: "2020-01-01T01:02:03.5Z", Sender: "a", Text: "x"}, time.UTC, "[01:02:03] a: x"},
		{"no time at all", client.Message{SentAt: "yesterday", Sender: "a", Text: "x"}, time.UTC, "[--:--:--] a: x"},
		{"anonymous", client.Message{ServerAt: at, Text: "who"}, time.UTC, "[10:00:05] anonymous: who"},
		{"line breaks and tabs become spaces", client.Message{ServerAt: at, Sender: "a", Text: "one\ntwo\r\n\tthree"}, time.UTC, "[10:00:05] a: one two   three"},
		{"escape sequences are defused", client.Message{ServerAt: at, Sender: "a\x1b[2J", Text: "\x1b[31mred\u2028"}, time.UTC, "[10:00:05] a\uFFFD[2J: \uFFFD[31mred\uFFFD"},
		{"unicode kept", client.Message{ServerAt: at, Sender: "zoë", Text: "日本語 ✓"}, time.UTC, "[10:00:05] zoë: 日本語 ✓"},
		{"empty text", client.Message{ServerAt: at, Sender: "a"}, time.UTC, "[10:00:05] a: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Format(&tt.m, tt.loc); got != tt.want {
				t.Errorf("Format = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 members", 1: "1 member", 2: "2 members"} {
		if got := plural(n, "member"); got != want {
			t.Errorf("plural(%d) = %q", n, got)
		}
	}
}
