package ws

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	gobwas "github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

var key = [4]byte{1, 2, 3, 4}

// frames builds a byte stream: masked frames for the server side to read,
// unmasked ones for the client side.
func frames(side Side, fs ...Header) []byte {
	var b []byte
	for _, h := range fs {
		payload := bytes.Repeat([]byte{'x'}, int(h.Length))
		if side == ServerSide {
			b = AppendMaskedFrame(b, h.OpCode, h.Fin, payload, key)
		} else {
			b = AppendFrame(b, h.OpCode, h.Fin, payload)
		}
	}
	return b
}

// readAll feeds stream to a Reader one chunk at a time, the way reads cut
// it, and returns what came out as "op:len" strings, or the error.
func readAll(stream []byte, side Side, limit int64, chunk int) ([]string, error) {
	var r Reader
	var out []string
	var buf []byte
	for len(stream) > 0 || len(buf) > 0 {
		k := min(chunk, len(stream))
		buf = append(buf, stream[:k]...)
		stream = stream[k:]
		for {
			f, n, _, err := r.Next(buf, side, limit)
			if err != nil {
				return out, err
			}
			if n == 0 {
				break
			}
			buf = buf[n:]
			if f.OpCode != 0 {
				out = append(out, fmt.Sprintf("%s:%03d", f.OpCode, len(f.Payload)))
			}
		}
		if k == 0 && len(buf) > 0 {
			return out, errors.New("stream ends inside a frame")
		}
	}
	return out, nil
}

func TestReader(t *testing.T) {
	text := func(fin bool, n int64) Header { return Header{Fin: fin, OpCode: OpText, Length: n} }
	cont := func(fin bool, n int64) Header { return Header{Fin: fin, OpCode: OpContinuation, Length: n} }
	ping := Header{Fin: true, OpCode: OpPing, Length: 3}
	for _, tt := range []struct {
		name    string
		fs      []Header
		limit   int64
		want    string
		errCode StatusCode
	}{
		{"one text", []Header{text(true, 5)}, 100, "text:005", 0},
		{"fragments joined", []Header{text(false, 2), cont(false, 3), cont(true, 4)}, 100, "text:009", 0},
		{"ping inside fragments", []Header{text(false, 2), ping, cont(true, 4)}, 100, "ping:003 text:006", 0},
		{"binary", []Header{{Fin: true, OpCode: OpBinary, Length: 7}}, 100, "binary:007", 0},
		{"empty", []Header{text(true, 0), {Fin: true, OpCode: OpClose}}, 100, "text:000 close:000", 0},
		{"at the limit", []Header{text(false, 50), cont(true, 50)}, 100, "text:100", 0},
		{"over the limit in one frame", []Header{text(true, 101)}, 100, "", CloseMessageTooBig},
		{"over the limit across fragments", []Header{text(false, 60), cont(true, 41)}, 100, "", CloseMessageTooBig},
		{"control frames are not data", []Header{{Fin: true, OpCode: OpPong, Length: 125}}, 10, "pong:125", 0},
		{"continuation without a message", []Header{cont(true, 1)}, 100, "", CloseProtocolError},
		{"new message inside a fragmented one", []Header{text(false, 1), text(true, 1)}, 100, "", CloseProtocolError},
		{"fragmented control frame", []Header{{OpCode: OpPing, Length: 1}}, 100, "", CloseProtocolError},
		{"reserved opcode", []Header{{Fin: true, OpCode: 0x3, Length: 1}}, 100, "", CloseProtocolError},
	} {
		for _, side := range []Side{ServerSide, ClientSide} {
			for _, chunk := range []int{1, 7, 1 << 20} {
				got, err := readAll(frames(side, tt.fs...), side, tt.limit, chunk)
				if tt.errCode != 0 {
					if err == nil || CodeOf(err) != tt.errCode {
						t.Errorf("%s (side %d, chunks of %d): got %q, %v; want close code %d", tt.name, side, chunk, got, err, tt.errCode)
					}
					continue
				}
				if err != nil || strings.Join(got, " ") != tt.want {
					t.Errorf("%s (side %d, chunks of %d): got %q, %v; want %q", tt.name, side, chunk, got, err, tt.want)
				}
			}
		}
	}
}

func TestReaderChecksMasking(t *testing.T) {
	var r Reader
	masked := AppendMaskedFrame(nil, OpText, true, []byte("hi"), key)
	plain := AppendFrame(nil, OpText, true, []byte("hi"))
	if _, _, _, err := r.Next(plain, ServerSide, 100); !errors.Is(err, ErrUnmasked) {
		t.Errorf("a server read an unmasked frame: %v", err)
	}
	if _, _, _, err := r.Next(masked, ClientSide, 100); !errors.Is(err, ErrMasked) {
		t.Errorf("a client read a masked frame: %v", err)
	}
	f, n, _, err := r.Next(masked, ServerSide, 100)
	if err != nil || n != len(masked) || string(f.Payload) != "hi" {
		t.Errorf("masked frame read as %q (%d bytes), %v", f.Payload, n, err)
	}
}

func TestReaderNeedAndEarlyTooBig(t *testing.T) {
	var r Reader
	frame := AppendFrame(nil, OpText, true, make([]byte, 300))
	_, n, need, err := r.Next(frame[:10], ClientSide, 1000)
	if err != nil || n != 0 || need != len(frame) {
		t.Errorf("partial frame: n %d need %d err %v, want 0, %d, nil", n, need, err, len(frame))
	}
	// A frame over the limit fails on its header, before its payload is read.
	_, _, _, err = r.Next(frame[:4], ClientSide, 100)
	if CodeOf(err) != CloseMessageTooBig {
		t.Errorf("over the limit: %v", err)
	}
}

func TestReaderReset(t *testing.T) {
	var r Reader
	b := frames(ServerSide, Header{OpCode: OpText, Length: 3})
	if _, _, _, err := r.Next(b, ServerSide, 100); err != nil || !r.Pending() {
		t.Fatalf("first fragment: pending %v, %v", r.Pending(), err)
	}
	r.Reset()
	if r.Pending() {
		t.Error("pending after Reset")
	}
	b = frames(ServerSide, Header{Fin: true, OpCode: OpText, Length: 2})
	if f, _, _, err := r.Next(b, ServerSide, 100); err != nil || f.OpCode != OpText {
		t.Errorf("after Reset a new message is refused: %v", err)
	}
}

// What another implementation writes, both as a client (masked, fragmented
// by its writer) and as a server, reads as the same messages.
func TestReaderReadsGobwasWriters(t *testing.T) {
	msgs := [][]byte{[]byte("hello"), bytes.Repeat([]byte("é"), 3000), {}}
	for _, tt := range []struct {
		side  Side
		state gobwas.State
	}{{ServerSide, gobwas.StateClientSide}, {ClientSide, gobwas.StateServerSide}} {
		var stream bytes.Buffer
		for _, m := range msgs {
			w := wsutil.NewWriterSize(&stream, tt.state, gobwas.OpText, 512) // fragments every 512 bytes
			if _, err := w.Write(m); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		var r Reader
		buf := stream.Bytes()
		var got [][]byte
		for len(buf) > 0 {
			f, n, _, err := r.Next(buf, tt.side, 1<<20)
			if err != nil || n == 0 {
				t.Fatalf("side %d: n %d, %v", tt.side, n, err)
			}
			buf = buf[n:]
			if f.OpCode == OpText {
				got = append(got, append([]byte(nil), f.Payload...))
			}
		}
		if len(got) != len(msgs) {
			t.Fatalf("side %d: %d messages, want %d", tt.side, len(got), len(msgs))
		}
		for i := range msgs {
			if !bytes.Equal(got[i], msgs[i]) {
				t.Errorf("side %d message %d: %d bytes differ", tt.side, i, len(got[i]))
			}
		}
	}
}

// Both sides refuse text at the fragment where it becomes invalid UTF-8.
func TestReaderUTF8FailsFast(t *testing.T) {
	for _, side := range []Side{ServerSide, ClientSide} {
		frame := func(op OpCode, fin bool, p string) []byte {
			if side == ServerSide {
				return AppendMaskedFrame(nil, op, fin, []byte(p), key)
			}
			return AppendFrame(nil, op, fin, []byte(p))
		}
		var r Reader
		if _, _, _, err := r.Next(frame(OpText, false, "ok \xf0\x9f"), side, 100); err != nil {
			t.Fatalf("side %d: an incomplete code point at the end of a fragment: %v", side, err)
		}
		if _, _, _, err := r.Next(frame(OpContinuation, false, "\x98("), side, 100); CodeOf(err) != CloseInvalidPayload {
			t.Errorf("side %d: the fragment that breaks the text: %v, want 1007", side, err)
		}
		r.Reset()
		if _, _, _, err := r.Next(frame(OpText, true, "\xff"), side, 100); CodeOf(err) != CloseInvalidPayload {
			t.Errorf("side %d: a whole invalid text: %v", side, err)
		}
		if f, _, _, err := r.Next(frame(OpBinary, true, "\xff"), side, 100); err != nil || f.OpCode != OpBinary {
			t.Errorf("side %d: binary is not text: %v", side, err)
		}
	}
}

// Autobahn 6.4.3/6.4.4: a frame that arrives a byte at a time is refused at
// the byte where its text becomes invalid, before the frame is whole.
func TestReaderUTF8FailsInsideAFrame(t *testing.T) {
	for _, side := range []Side{ServerSide, ClientSide} {
		text := "κόσμε\xf4\x90\x80\x80edited"
		var frame []byte
		if side == ServerSide {
			frame = AppendMaskedFrame(nil, OpText, true, []byte(text), key)
		} else {
			frame = AppendFrame(nil, OpText, true, []byte(text))
		}
		hn := HeaderSize(len(text), side == ServerSide)
		bad := hn + len("κόσμε\xf4\x90") // the byte that makes it invalid, exclusive
		var r Reader
		buf := make([]byte, 0, len(frame))
		for i := range frame {
			buf = append(buf, frame[i]) // the caller keeps what Next did not use, as is
			_, n, _, err := r.Next(buf, side, 100)
			if err != nil {
				if CodeOf(err) != CloseInvalidPayload || i+1 != bad {
					t.Fatalf("side %d: %v after %d bytes, want 1007 after %d", side, err, i+1, bad)
				}
				break
			}
			if n != 0 || i+1 >= bad {
				t.Fatalf("side %d: %d bytes in, n %d: not refused", side, i+1, n)
			}
		}
	}
}

// A frame whose length is not minimally encoded fails the connection with
// close 1002 (RFC 6455 section 5.2), on both sides, as soon as its length
// bytes are in: after a valid frame, and cut at every byte.
func TestReaderRefusesNonMinimalLength(t *testing.T) {
	for _, side := range []Side{ServerSide, ClientSide} {
		good := frames(side, Header{Fin: true, OpCode: OpText, Length: 3})
		// A 5-byte text frame, its length in 16 bits.
		bad := []byte{0x81, 0x7e, 0x00, 0x05}
		if side == ServerSide {
			bad[1] |= 0x80
			bad = append(bad, key[:]...)
		}
		bad = append(bad, "hello"...)
		for _, chunk := range []int{1, 3, 64} {
			out, err := readAll(append(append([]byte{}, good...), bad...), side, 100, chunk)
			if !errors.Is(err, ErrNonMinimalLength) || CodeOf(err) != CloseProtocolError {
				t.Errorf("side %v, chunks of %d: err %v (code %d), want %v (1002)", side, chunk, err, CodeOf(err), ErrNonMinimalLength)
			}
			if len(out) != 1 || out[0] != "text:003" {
				t.Errorf("side %v, chunks of %d: read %v before the error, want the valid frame", side, chunk, out)
			}
		}
	}
}
