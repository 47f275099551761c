//go:build linux && !race

package loadtest

import "testing"

// The race detector's instrumentation allocates on its own: these run
// without it (scripts/test.sh runs the allocation tests in a step of their
// own).

// TestAllocsDecode pins docs/loadtest.md: every protocol's adapter reads a
// delivery's fields in place, without allocating.
func TestAllocsDecode(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	chat := `{"room":"lt-s1-r3","seq":42,"server_at":"2026-11-21T10:00:00.124031Z","message_id":4294967297,"due_us":1763719201000000,"text":"xxxx"}`
	tests := []struct {
		name  string
		w     wire
		frame string
	}{
		{"scalechat", scalechatWire{}, chat},
		{"echo", echoWire{}, chat},
		{"legacy", legacyWire{}, `{"message_id":7,"text":"xxxx","sender":"12","sent_at":"2026-11-21T10:00:00.123Z","room":"lt-s1-r3"}`},
		{"centrifugo", centrifugoWire{ns: "chat"}, `{"push":{"channel":"chat:lt-s1-r3","pub":{"data":{"message_id":4294967297,"due_us":1763719201000000,"text":"xxxx"},"offset":42}}}`},
		{"socketio", newSocketIOWire(""), `42["chat",{"room":"lt-s1-r3","message_id":"30064771079","due_us":1700000000000000,"text":"hi"}]`},
	}
	in := make([]inbound, 0, 8)
	for _, tt := range tests {
		frame := []byte(tt.frame)
		got := testing.AllocsPerRun(100, func() {
			in = tt.w.decode(frame, in[:0])
			if len(in) != 1 || in[0].kind != inMessage || !in[0].hasID {
				t.Fatalf("%s: decoded %+v", tt.name, in)
			}
		})
		if got != 0 {
			t.Errorf("%s: %v allocations per delivery, want 0", tt.name, got)
		}
	}
}
