package ws

import (
	"bytes"
	"fmt"
	"testing"
)

// chatPayload is a chat message as clients send it: the size of the load
// tests' messages.
var chatPayload = []byte(`{"message_id":12345,"text":"the quick brown fox jumps over the lazy dog 0123456789","sender":"loadtest-0042","sent_at":"2026-11-21T10:00:00.123456Z"}`)

// BenchmarkReaderNext is the server reading one client frame from its read
// buffer: header, unmasking in place, the UTF-8 check. Each iteration first
// copies the masked frame back in (Next unmasks it in place), as a read()
// would; the copy is part of the figure.
func BenchmarkReaderNext(b *testing.B) {
	for _, size := range []int{len(chatPayload), 1024, 16 << 10} {
		payload := bytes.Repeat(chatPayload, size/len(chatPayload)+1)[:size]
		masked := AppendMaskedFrame(nil, OpText, true, payload, [4]byte{0x11, 0x22, 0x33, 0x44})
		buf := make([]byte, len(masked))
		b.Run(fmt.Sprintf("masked/%dB", size), func(b *testing.B) {
			var r Reader
			b.SetBytes(int64(len(masked)))
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, masked)
				f, n, _, err := r.Next(buf, ServerSide, 1<<20)
				if err != nil || n != len(buf) || len(f.Payload) != size {
					b.Fatalf("Next: frame of %d bytes, used %d, err %v", len(f.Payload), n, err)
				}
			}
		})
	}
	// The load tester's side: a server's unmasked frame, nothing to copy.
	plain := AppendFrame(nil, OpText, true, chatPayload)
	b.Run(fmt.Sprintf("unmasked/%dB", len(chatPayload)), func(b *testing.B) {
		var r Reader
		b.SetBytes(int64(len(plain)))
		b.ReportAllocs()
		for b.Loop() {
			if _, n, _, err := r.Next(plain, ClientSide, 1<<20); err != nil || n != len(plain) {
				b.Fatalf("Next: used %d, err %v", n, err)
			}
		}
	})
}

// BenchmarkAcceptKey is the handshake's share of an upgrade: checking the
// client's key and computing the Sec-WebSocket-Accept value.
func BenchmarkAcceptKey(b *testing.B) {
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	b.ReportAllocs()
	for b.Loop() {
		if !ValidClientKey(key) {
			b.Fatal("key refused")
		}
		if AcceptKey(key) != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
			b.Fatal("wrong accept key")
		}
	}
}
