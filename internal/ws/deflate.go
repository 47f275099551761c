package ws

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/klauspost/compress/flate"
)

// permessage-deflate (RFC 7692), without context takeover on either side:
// every message is compressed on its own, so a broadcast frame is
// compressed once and shared by every member, and a connection keeps no
// compression state (no 32 KiB window per connection).

// DeflateExtension is the Sec-WebSocket-Extensions value a server answers
// an accepted offer with.
const DeflateExtension = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"

// DeflateClientOffer is what a client of this package offers: no context
// takeover either way, and client_max_window_bits, since a window the
// server limits costs such a client nothing (it may compress what it sends
// with any window, or not at all).
const DeflateClientOffer = DeflateExtension + "; client_max_window_bits"

// rsv1 is the RSV1 bit as Header.Rsv holds it: set on the first frame of a
// compressed message.
const rsv1 = 4

// AcceptDeflate reports whether a client's Sec-WebSocket-Extensions header
// values hold a permessage-deflate offer this package can take: any
// client_max_window_bits (it only limits the client), server_max_window_bits
// only if 15 (the compressor's window is 32 KiB), the no-context-takeover
// parameters, and nothing else. Offers it cannot take are declined, so the
// connection goes on uncompressed.
func AcceptDeflate(headers []string) bool {
	for _, h := range headers {
		for _, offer := range strings.Split(h, ",") {
			if acceptableOffer(offer) {
				return true
			}
		}
	}
	return false
}

func acceptableOffer(offer string) bool {
	params := strings.Split(offer, ";")
	if strings.TrimSpace(params[0]) != "permessage-deflate" {
		return false
	}
	seen := map[string]bool{}
	for _, p := range params[1:] {
		name, value, hasValue := strings.Cut(strings.TrimSpace(p), "=")
		name, value = strings.TrimSpace(name), strings.Trim(strings.TrimSpace(value), `"`)
		if seen[name] {
			return false // a parameter twice: the offer is invalid (RFC 7692 section 7)
		}
		seen[name] = true
		switch name {
		case "server_no_context_takeover", "client_no_context_takeover":
			if hasValue {
				return false
			}
		case "client_max_window_bits":
			if hasValue && !windowBits(value) {
				return false
			}
		case "server_max_window_bits":
			if !hasValue || !windowBits(value) || value != "15" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func windowBits(v string) bool {
	switch v {
	case "8", "9", "10", "11", "12", "13", "14", "15":
		return true
	}
	return false
}

// ClientAcceptedDeflate reports whether a server's Sec-WebSocket-Extensions
// answer to DeflateClientOffer enables permessage-deflate. It fails for an
// answer the offer does not allow, and for one without
// server_no_context_takeover: a server that keeps its compression context
// sends messages an Inflater, which keeps none, cannot read.
func ClientAcceptedDeflate(value string) (bool, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return false, nil
	}
	params := strings.Split(value, ";")
	if strings.TrimSpace(params[0]) != "permessage-deflate" || strings.Contains(value, ",") {
		return false, errors.New("ws: the server answered with an extension that was not offered")
	}
	noContext := false
	for _, p := range params[1:] {
		name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch strings.TrimSpace(name) {
		case "server_no_context_takeover":
			noContext = true
		case "client_no_context_takeover":
		case "server_max_window_bits", "client_max_window_bits":
			if !windowBits(strings.Trim(strings.TrimSpace(value), `"`)) {
				return false, errors.New("ws: bad window bits in the server's permessage-deflate answer")
			}
		default:
			return false, errors.New("ws: unknown parameter in the server's permessage-deflate answer")
		}
	}
	if !noContext {
		return false, errors.New("ws: the server's permessage-deflate answer keeps its compression context (no server_no_context_takeover)")
	}
	return true, nil
}

// deflateTail ends every compressed message before it is cut off (RFC 7692
// section 7.2.1).
var deflateTail = []byte{0, 0, 0xff, 0xff}

var compressors = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed) // a valid level never fails
	return w
}}

// AppendDeflatedFrame appends payload as one compressed, unmasked frame
// (RSV1 set) to dst. It may be called from any goroutine.
func AppendDeflatedFrame(dst []byte, op OpCode, payload []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(payload)/2 + 16)
	w := compressors.Get().(*flate.Writer)
	w.Reset(&buf)
	_, _ = w.Write(payload) // writes to a bytes.Buffer do not fail
	_ = w.Flush()
	compressors.Put(w)
	z := bytes.TrimSuffix(buf.Bytes(), deflateTail)
	dst = AppendHeader(dst, Header{Fin: true, Rsv: rsv1, OpCode: op, Length: int64(len(z))})
	return append(dst, z...)
}

// DeflatedFrame returns a frame (see AppendDeflatedFrame) in a buffer of
// its own size.
func DeflatedFrame(op OpCode, payload []byte) []byte {
	f := AppendDeflatedFrame(nil, op, payload)
	return append(make([]byte, 0, len(f)), f...)
}

// Inflater decompresses messages. One per goroutine: an event loop keeps
// one for all its connections, since no context carries over between
// messages.
type Inflater struct {
	in  []byte
	src bytes.Reader
	fr  io.ReadCloser
	out bytes.Buffer
}

var errInflate = &ProtocolError{CloseInvalidPayload, "compressed message is not valid deflate data"}

// Inflate decompresses the payload of a compressed message m (see
// Frame.Compressed), appending it to dst, and checks that a text message is
// UTF-8 (CloseInvalidPayload). More than limit bytes out is an error with
// code CloseMessageTooBig, whatever the compressed size (a deflate bomb).
func (f *Inflater) Inflate(dst []byte, m Frame, limit int64) ([]byte, error) {
	f.in = append(append(f.in[:0], m.Payload...), deflateTail...)
	f.src.Reset(f.in)
	if f.fr == nil {
		f.fr = flate.NewReader(&f.src)
	} else if err := f.fr.(flate.Resetter).Reset(&f.src, nil); err != nil {
		return dst, errInflate
	}
	f.out.Reset()
	n, err := f.out.ReadFrom(io.LimitReader(f.fr, limit+1))
	// The message ends with the sync flush: reading stops there with
	// io.ErrUnexpectedEOF, which is not an error here.
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return dst, errInflate
	}
	if n > limit {
		return dst, errTooBig
	}
	out := f.out.Bytes()
	if m.OpCode == OpText && !utf8.Valid(out) {
		return dst, errInvalidUTF8
	}
	dst = append(dst, out...)
	if cap(f.in) > 1<<20 { // let a rare huge message's buffers go
		f.in, f.out = nil, bytes.Buffer{}
	}
	return dst, nil
}
