//go:build linux

package loadtest

import "testing"

func TestParseFields(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
		want frameFields
	}{
		{"chat", `{"room":"lt-s1-r3","seq":42,"server_at":"2026-11-21T10:00:00.124031Z","message_id":4294967297,"due_us":1763719201000000,"text":"hello"}`,
			true, frameFields{room: []byte("lt-s1-r3"), seq: 42, hasSeq: true, messageID: 1<<32 | 1, hasID: true, dueUs: 1763719201000000, hasDue: true}},
		{"joined", `{"type":"joined","room":"lobby","seq":41,"members":3,"history":2}`,
			true, frameFields{typ: []byte("joined"), hasType: true, room: []byte("lobby"), seq: 41, hasSeq: true}},
		{"spaces and nesting", " { \"x\" : {\"a\":[1,{\"seq\":9}],\"b\":\"}\"} , \"seq\" : 7 , \"text\":\"a\\\"b\\\\\" } ",
			true, frameFields{seq: 7, hasSeq: true}},
		{"escaped quote before key", `{"text":"say \"seq\":1","message_id":5}`, true, frameFields{messageID: 5, hasID: true}},
		{"empty object", `{}`, true, frameFields{}},
		{"max uint64", `{"message_id":18446744073709551615}`, true, frameFields{messageID: 1<<64 - 1, hasID: true}},
		{"overflow", `{"message_id":18446744073709551616}`, true, frameFields{}},
		{"negative seq", `{"seq":-1}`, true, frameFields{}},
		{"float id", `{"message_id":1.5}`, true, frameFields{}},
		{"not object", `[1,2]`, false, frameFields{}},
		{"truncated", `{"room":"a`, false, frameFields{}},
		{"truncated after value", `{"seq":1`, false, frameFields{}},
		{"no colon", `{"seq" 1}`, false, frameFields{}},
		{"garbage after value", `{"seq":1 x}`, false, frameFields{}},
		{"empty", ``, false, frameFields{}},
		{"unterminated nested", `{"a":{"b":1}`, false, frameFields{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f frameFields
			ok := parseFields([]byte(tt.in), &f)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if string(f.typ) != string(tt.want.typ) || f.hasType != tt.want.hasType || string(f.room) != string(tt.want.room) ||
				f.seq != tt.want.seq || f.hasSeq != tt.want.hasSeq || f.messageID != tt.want.messageID || f.hasID != tt.want.hasID ||
				f.dueUs != tt.want.dueUs || f.hasDue != tt.want.hasDue {
				t.Errorf("got %+v\nwant %+v", f, tt.want)
			}
		})
	}
}

func FuzzParseFields(f *testing.F) {
	f.Add([]byte(`{"room":"r","seq":1,"message_id":2,"text":"x"}`))
	f.Add([]byte(`{"type":"joined","room":"lobby","seq":41}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ff frameFields
		parseFields(b, &ff) // must not panic
	})
}

func BenchmarkParseFields(b *testing.B) {
	msg := []byte(`{"room":"lt-s1-r3","seq":42,"server_at":"2026-11-21T10:00:00.124031Z","message_id":4294967297,"due_us":1763719201000000,"text":"` +
		string(make256()) + `"}`)
	var f frameFields
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		parseFields(msg, &f)
	}
}

func make256() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = 'x'
	}
	return b
}
