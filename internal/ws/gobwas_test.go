package ws

import (
	"bytes"
	"errors"
	"io"
	"testing"

	gobwas "github.com/gobwas/ws"
)

// The codec agrees with github.com/gobwas/ws, a widely used implementation,
// on headers, masking and close payloads, in both directions.

func toGobwas(h Header) gobwas.Header {
	return gobwas.Header{Fin: h.Fin, Rsv: h.Rsv, OpCode: gobwas.OpCode(h.OpCode), Masked: h.Masked, Mask: h.Mask, Length: h.Length}
}

func fromGobwas(h gobwas.Header) Header {
	return Header{Fin: h.Fin, Rsv: h.Rsv, OpCode: OpCode(h.OpCode), Masked: h.Masked, Mask: h.Mask, Length: h.Length}
}

func TestGobwasHeaders(t *testing.T) {
	for _, length := range []int64{0, 1, 125, 126, 127, 65535, 65536, 1<<32 + 5, 1<<63 - 1} {
		for _, masked := range []bool{false, true} {
			for _, op := range []OpCode{OpContinuation, OpText, OpBinary, OpClose, OpPing, OpPong, 0x3, 0xf} {
				for _, fin := range []bool{false, true} {
					for rsv := byte(0); rsv < 8; rsv += 3 {
						h := Header{Fin: fin, Rsv: rsv, OpCode: op, Masked: masked, Length: length}
						if masked {
							h.Mask = [4]byte{0xde, 0xad, byte(length), byte(op)}
						}
						// gobwas writes, we read.
						var buf bytes.Buffer
						if err := gobwas.WriteHeader(&buf, toGobwas(h)); err != nil {
							t.Fatal(err)
						}
						got, n, err := ParseHeader(buf.Bytes())
						if err != nil || n != buf.Len() || got != h {
							t.Fatalf("ParseHeader of gobwas's % x = %+v, %d, %v, want %+v", buf.Bytes(), got, n, err, h)
						}
						// We write, gobwas reads.
						ours := AppendHeader(nil, h)
						if !bytes.Equal(ours, buf.Bytes()) {
							t.Fatalf("AppendHeader(%+v) = % x, gobwas writes % x", h, ours, buf.Bytes())
						}
						gh, err := gobwas.ReadHeader(bytes.NewReader(ours))
						if err != nil || fromGobwas(gh) != h {
							t.Fatalf("gobwas reads our % x as %+v, %v, want %+v", ours, gh, err, h)
						}
						if HeaderSize(int(length), masked) != gobwas.HeaderSize(toGobwas(h)) {
							t.Fatalf("HeaderSize(%d, %v) = %d, gobwas %d", length, masked, HeaderSize(int(length), masked), gobwas.HeaderSize(toGobwas(h)))
						}
					}
				}
			}
		}
	}
}

// compareWithGobwas checks that ParseHeader and gobwas.ReadHeader agree on b.
func compareWithGobwas(t *testing.T, b []byte) {
	t.Helper()
	h, n, err := ParseHeader(b)
	gh, gerr := gobwas.ReadHeader(bytes.NewReader(b))
	switch {
	case err == ErrNonMinimalLength:
		// gobwas reads a longer encoding than needed; RFC 6455 section 5.2
		// forbids it, so ParseHeader refuses it (TestParseHeaderNonMinimalLength).
		short := h.Masked && errors.Is(gerr, io.ErrUnexpectedEOF)
		fits := b[1]&0x7f == 126 && gh.Length < 126 || b[1]&0x7f == 127 && gh.Length <= 0xffff
		if !short && (gerr != nil || !fits) {
			t.Fatalf("% x: ParseHeader says %v, gobwas %+v, %v", b, err, gh, gerr)
		}
	case err != nil:
		// gobwas reads the mask together with the length, so it may stop
		// short of the mask before it looks at the length.
		short := h.Masked && len(b) < MaxHeaderSize && errors.Is(gerr, io.ErrUnexpectedEOF)
		if err != ErrLengthOverflow || gerr != gobwas.ErrHeaderLengthMSB && !short {
			t.Fatalf("% x: ParseHeader says %v, gobwas %v", b, err, gerr)
		}
	case n == 0:
		if !errors.Is(gerr, io.ErrUnexpectedEOF) && !errors.Is(gerr, io.EOF) {
			t.Fatalf("% x: ParseHeader needs more bytes, gobwas says %+v, %v", b, gh, gerr)
		}
	default:
		if gerr != nil || fromGobwas(gh) != h {
			t.Fatalf("% x: ParseHeader = %+v, gobwas = %+v, %v", b, h, gh, gerr)
		}
	}
}

func TestGobwasParseAgrees(t *testing.T) {
	for _, b := range [][]byte{
		{}, {0x81}, {0x81, 0x05}, {0x81, 0x7e}, {0x81, 0x7e, 0x01}, {0x81, 0x7e, 0x01, 0x00},
		{0x81, 0x7f, 0, 0, 0, 0, 0, 1, 0}, {0x81, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0},
		{0x81, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3}, {0x81, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4},
		{0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x81, 0x85, 0x37, 0xfa, 0x21}, {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d},
	} {
		compareWithGobwas(t, b)
	}
}

func TestGobwasMask(t *testing.T) {
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	src := make([]byte, 200)
	for i := range src {
		src[i] = byte(i * 7)
	}
	for length := 0; length <= len(src); length += 7 {
		for pos := 0; pos < 8; pos++ {
			ours := bytes.Clone(src[:length])
			theirs := bytes.Clone(src[:length])
			Mask(ours, key, pos)
			gobwas.Cipher(theirs, key, pos)
			if !bytes.Equal(ours, theirs) {
				t.Fatalf("Mask(len %d, pos %d) differs from gobwas.Cipher", length, pos)
			}
		}
	}
}

func TestGobwasFrames(t *testing.T) {
	key := [4]byte{1, 2, 3, 4}
	payload := bytes.Repeat([]byte("scalechat "), 20)
	// A masked client frame built by gobwas is read by us.
	f := gobwas.MaskFrameWith(gobwas.NewTextFrame(payload), key)
	wire, err := gobwas.CompileFrame(f)
	if err != nil {
		t.Fatal(err)
	}
	if ours := AppendMaskedFrame(nil, OpText, true, payload, key); !bytes.Equal(ours, wire) {
		t.Fatalf("AppendMaskedFrame differs from gobwas:\n% x\n% x", ours, wire)
	}
	h, n, err := ParseHeader(wire)
	if err != nil || h.Validate(true) != nil {
		t.Fatalf("ParseHeader = %+v, %v", h, err)
	}
	got := bytes.Clone(wire[n:])
	Mask(got, h.Mask, 0)
	if !bytes.Equal(got, payload) {
		t.Fatal("unmasked payload differs")
	}

	// Our close frame is read by gobwas, and gobwas's by us.
	ours := AppendCloseFrame(nil, CloseTryAgainLater, "slow consumer")
	rd := bytes.NewReader(ours)
	gh, err := gobwas.ReadHeader(rd)
	if err != nil || gh.OpCode != gobwas.OpClose || gh.Length != int64(rd.Len()) {
		t.Fatalf("gobwas reads %+v, %v", gh, err)
	}
	code, reason := gobwas.ParseCloseFrameData(ours[len(ours)-rd.Len():])
	if code != gobwas.StatusCode(CloseTryAgainLater) || reason != "slow consumer" {
		t.Fatalf("gobwas reads close %d %q", code, reason)
	}
	theirs := gobwas.MustCompileFrame(gobwas.NewCloseFrame(gobwas.NewCloseFrameBody(gobwas.StatusGoingAway, "bye")))
	if !bytes.Equal(theirs, AppendCloseFrame(nil, CloseGoingAway, "bye")) {
		t.Fatalf("close frames differ: gobwas % x", theirs)
	}
	h, n, err = ParseHeader(theirs)
	if err != nil || h.Validate(false) != nil {
		t.Fatal(err)
	}
	c, r, err := ParseClosePayload(theirs[n:])
	if err != nil || c != CloseGoingAway || string(r) != "bye" {
		t.Fatalf("ParseClosePayload = %d, %q, %v", c, r, err)
	}
}
