package protocol

import (
	"testing"
	"time"
)

// The hot path does not allocate: parsing a chat message, a control frame
// or a refused frame, and every encoder writing into a buffer with room.
func TestNoAllocations(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	chat := []byte(`{"message_id": 7, "text": "hello, how are you doing today?", "sender": "alice", "sent_at": "2026-11-21T10:00:00.123Z", "room": "lobby"}`)
	join := []byte(`{"type":"join","room":"lo\u0062by","since":40}`)
	bad := []byte(`{"text":"a","room":"no room!","message_id":3}`)
	var f Frame
	dst := make([]byte, 0, 4096)
	at := time.Now()
	tests := []struct {
		name string
		fn   func()
	}{
		{"ParseFrame chat", func() {
			if err := ParseFrame(chat, &f); err != nil {
				t.Fatal(err)
			}
		}},
		{"ParseFrame join", func() {
			if err := ParseFrame(join, &f); err != nil {
				t.Fatal(err)
			}
		}},
		{"ParseFrame refused", func() {
			if err := ParseFrame(bad, &f); err == nil {
				t.Fatal("accepted")
			}
		}},
		{"ParseFrame invalid JSON", func() {
			if err := ParseFrame(chat[:len(chat)-1], &f); err == nil {
				t.Fatal("accepted")
			}
		}},
		{"AppendChat", func() {
			if err := ParseFrame(chat, &f); err != nil {
				t.Fatal(err)
			}
			dst = AppendChat(dst[:0], "lobby", 42, at, &f, chat)
		}},
		{"AppendJoined", func() { dst = AppendJoined(dst[:0], "lobby", "e", 41, 3, 2, "k2m4q9x0-17") }},
		{"AppendLeft", func() { dst = AppendLeft(dst[:0], "lobby", 41) }},
		{"AppendPresenceUsers", func() { dst = AppendPresenceUsers(dst[:0], "lobby", 3, []UserCount{{"alice", 2}}, 1) }},
		{"AppendPresenceEvent", func() { dst = AppendPresenceEvent(dst[:0], "lobby", "alice", true) }},
		{"AppendHistoryGap", func() { dst = AppendHistoryGap(dst[:0], "lobby", 5, 40, true) }},
		{"AppendError", func() {
			err := ParseFrame(bad, &f)
			e := err.(*Error)
			dst = AppendError(dst[:0], e.Code, e.Message, &f)
		}},
		{"AppendError with room", func() {
			if err := ParseFrame(chat, &f); err != nil {
				t.Fatal(err)
			}
			dst = AppendError(dst[:0], CodeRateLimited, "more than 20 messages per second", &f)
		}},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(100, tt.fn); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", tt.name, n)
		}
	}
}
