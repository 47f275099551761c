package protocol

import (
	"encoding/json"
	"testing"
	"time"
)

// A typical chat message of the load tests.
var benchChat = []byte(`{"message_id":12345,"text":"the quick brown fox jumps over the lazy dog 0123456789","sender":"loadtest-0042","sent_at":"2026-11-21T10:00:00.123456Z"}`)

func BenchmarkParseFrame(b *testing.B) {
	var f Frame
	b.SetBytes(int64(len(benchChat)))
	b.ReportAllocs()
	for b.Loop() {
		if err := ParseFrame(benchChat, &f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendChat(b *testing.B) {
	var f Frame
	if err := ParseFrame(benchChat, &f); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, 1024)
	at := time.Date(2026, 11, 21, 10, 0, 0, 124031000, time.UTC)
	b.SetBytes(int64(len(benchChat)))
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendChat(dst[:0], "lobby", 42, at, &f, benchChat)
	}
}

func BenchmarkAppendJoined(b *testing.B) {
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendJoined(dst[:0], "lobby", "e", 41, 3, 2, "k2m4q9x0-17")
	}
}

// BenchmarkEncodingJSON is the reference ParseFrame replaces: decoding the
// same message with encoding/json into the raw members a broadcast needs.
func BenchmarkEncodingJSON(b *testing.B) {
	b.SetBytes(int64(len(benchChat)))
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(benchChat, &m); err != nil {
			b.Fatal(err)
		}
	}
}
