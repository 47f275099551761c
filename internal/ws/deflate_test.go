package ws

import (
	"bytes"
	stdflate "compress/flate"
	"io"
	"strings"
	"testing"
)

func TestAcceptDeflate(t *testing.T) {
	for _, tt := range []struct {
		headers []string
		want    bool
	}{
		{nil, false},
		{[]string{"permessage-deflate"}, true},
		{[]string{"permessage-deflate; client_max_window_bits"}, true}, // what browsers offer
		{[]string{"permessage-deflate; client_max_window_bits=10; server_no_context_takeover"}, true},
		{[]string{"permessage-deflate; server_max_window_bits=15"}, true},
		{[]string{"permessage-deflate; server_max_window_bits=9"}, false}, // our window is 32 KiB
		{[]string{"permessage-deflate; server_max_window_bits=9, permessage-deflate"}, true},
		{[]string{"x-webkit-deflate-frame", "permessage-deflate"}, true},
		{[]string{"permessage-deflate; client_no_context_takeover; client_no_context_takeover"}, false},
		{[]string{"permessage-deflate; unknown=1"}, false},
		{[]string{"permessage-deflate; client_max_window_bits=16"}, false},
		{[]string{"permessage-deflate; server_no_context_takeover=1"}, false},
		{[]string{"foo"}, false},
	} {
		if got := AcceptDeflate(tt.headers); got != tt.want {
			t.Errorf("AcceptDeflate(%q) = %v, want %v", tt.headers, got, tt.want)
		}
	}
	for _, tt := range []struct {
		answer  string
		on, bad bool
	}{
		{"", false, false},
		{DeflateExtension, true, false},
		{"permessage-deflate; server_no_context_takeover; server_max_window_bits=12", true, false},
		{"permessage-deflate; server_no_context_takeover; client_max_window_bits=9", true, false},
		{"permessage-deflate; server_max_window_bits=12", false, true}, // the server keeps its context
		{"permessage-deflate", false, true},
		{"permessage-deflate; bogus", false, true},
		{"x-other", false, true},
	} {
		on, err := ClientAcceptedDeflate(tt.answer)
		if on != tt.on || (err != nil) != tt.bad {
			t.Errorf("ClientAcceptedDeflate(%q) = %v, %v", tt.answer, on, err)
		}
	}
}

// Our frames inflate with the standard library's decoder, and the standard
// library's compressed messages inflate with ours.
func TestDeflateAgainstStdlib(t *testing.T) {
	msgs := [][]byte{[]byte(`{"room":"r","seq":1,"text":"hello hello hello hello"}`), bytes.Repeat([]byte("chat "), 2000), {}, []byte("é€😀")}
	var inf Inflater
	for _, m := range msgs {
		frame := AppendDeflatedFrame(nil, OpText, m)
		h, hn, err := ParseHeader(frame)
		if err != nil || h.Rsv != rsv1 || !h.Fin || h.OpCode != OpText {
			t.Fatalf("header %+v %v", h, err)
		}
		z := append(append([]byte(nil), frame[hn:]...), deflateTail...)
		got, err := io.ReadAll(stdflate.NewReader(bytes.NewReader(z)))
		if err != nil && err != io.ErrUnexpectedEOF || !bytes.Equal(got, m) {
			t.Errorf("stdlib inflates %d bytes into %d (%v)", len(m), len(got), err)
		}
		var buf bytes.Buffer
		w, _ := stdflate.NewWriter(&buf, stdflate.DefaultCompression)
		w.Write(m)
		w.Flush()
		back, err := inf.Inflate(nil, Frame{OpCode: OpBinary, Payload: bytes.TrimSuffix(buf.Bytes(), deflateTail)}, 1<<20)
		if err != nil || !bytes.Equal(back, m) {
			t.Errorf("Inflate of stdlib's %d bytes: %d bytes, %v", len(m), len(back), err)
		}
	}
	if len(AppendDeflatedFrame(nil, OpText, msgs[1])) > len(msgs[1])/10 {
		t.Error("a repetitive message does not shrink")
	}
}

func TestInflateRefuses(t *testing.T) {
	var inf Inflater
	var buf bytes.Buffer
	w, _ := stdflate.NewWriter(&buf, stdflate.BestCompression)
	w.Write(make([]byte, 10<<20)) // 10 MiB of zeros: a few KiB compressed
	w.Flush()
	if _, err := inf.Inflate(nil, Frame{OpCode: OpBinary, Payload: buf.Bytes()}, 1<<20); CodeOf(err) != CloseMessageTooBig {
		t.Errorf("a deflate bomb: %v, want 1009", err)
	}
	if _, err := inf.Inflate(nil, Frame{OpCode: OpBinary, Payload: []byte{0xff, 0xfe, 0xfd}}, 1<<20); CodeOf(err) != CloseInvalidPayload {
		t.Errorf("not deflate data: %v, want 1007", err)
	}
	if _, err := inf.Inflate(nil, Frame{OpCode: OpText, Payload: AppendDeflatedFrame(nil, OpText, []byte("\xff not UTF-8"))[2:]}, 100); CodeOf(err) != CloseInvalidPayload {
		t.Errorf("invalid UTF-8 inside: %v, want 1007", err)
	}
	if got, err := inf.Inflate(nil, Frame{OpCode: OpText, Payload: AppendDeflatedFrame(nil, OpText, []byte("still fine"))[2:]}, 100); err != nil || string(got) != "still fine" {
		t.Errorf("after errors: %q, %v", got, err)
	}
}

func TestReaderCompressed(t *testing.T) {
	payload := []byte(strings.Repeat("compress me ", 50))
	frame := AppendDeflatedFrame(nil, OpText, payload)
	var r Reader
	if _, _, _, err := r.Next(frame, ClientSide, 1<<20); err != ErrReservedBits {
		t.Errorf("RSV1 without negotiation: %v", err)
	}
	r.SetDeflate(true)
	f, n, _, err := r.Next(frame, ClientSide, 1<<20)
	if err != nil || n != len(frame) || !f.Compressed {
		t.Fatalf("compressed frame: %+v %d %v", f, n, err)
	}
	var inf Inflater
	if got, err := inf.Inflate(nil, f, 1<<20); err != nil || !bytes.Equal(got, payload) {
		t.Errorf("inflated %d bytes, %v", len(got), err)
	}
	// Fragmented: RSV1 on the first frame only.
	_, hn, _ := ParseHeader(frame)
	z := frame[hn:]
	first := AppendHeader(nil, Header{Rsv: rsv1, OpCode: OpText, Length: 5})
	first = append(first, z[:5]...)
	rest := AppendFrame(nil, OpContinuation, true, z[5:])
	if f, _, _, err := r.Next(first, ClientSide, 1<<20); err != nil || f.OpCode != 0 {
		t.Fatalf("first fragment: %+v %v", f, err)
	}
	f, _, _, err = r.Next(rest, ClientSide, 1<<20)
	if err != nil || !f.Compressed || !bytes.Equal(f.Payload, z) {
		t.Fatalf("joined fragments: %v", err)
	}
	// RSV1 on a continuation or a control frame is an error.
	r.Reset()
	bad := AppendHeader(nil, Header{Fin: true, Rsv: rsv1, OpCode: OpPing})
	if _, _, _, err := r.Next(bad, ClientSide, 100); err != ErrReservedBits {
		t.Errorf("RSV1 on a ping: %v", err)
	}
	r.Next(first, ClientSide, 1<<20)
	badCont := AppendHeader(nil, Header{Fin: true, Rsv: rsv1, OpCode: OpContinuation, Length: 1})
	if _, _, _, err := r.Next(append(badCont, 'x'), ClientSide, 100); err != ErrReservedBits {
		t.Errorf("RSV1 on a continuation: %v", err)
	}
}
