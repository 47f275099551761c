package ws

import "unicode/utf8"

// Side is the end of a connection that reads: a server reads the masked
// frames of a client, a client the unmasked frames of a server.
type Side uint8

// The two ends of a connection.
const (
	ServerSide Side = iota // reads client frames: masked
	ClientSide             // reads server frames: unmasked
)

// ProtocolError is input a Reader cannot accept: the connection must be
// failed with Code (RFC 6455 section 7.1.7).
type ProtocolError struct {
	Code   StatusCode // CloseProtocolError or CloseMessageTooBig
	Reason string
}

func (e *ProtocolError) Error() string { return e.Reason }

// Errors of a Reader that are not header errors.
var (
	errNewInsideFragmented = &ProtocolError{CloseProtocolError, "new message inside a fragmented one"}
	errOrphanContinuation  = &ProtocolError{CloseProtocolError, "continuation without a message"}
	errTooBig              = &ProtocolError{CloseMessageTooBig, "message too big"}
	errInvalidUTF8         = &ProtocolError{CloseInvalidPayload, "text is not valid UTF-8"}
)

// Frame is what a Reader hands out: a whole data message (OpText or
// OpBinary, its fragments joined) or a control frame (OpClose, OpPing,
// OpPong). Payload is unmasked; it aliases the input or the Reader's
// fragment buffer and is valid until the next call of Next.
type Frame struct {
	OpCode  OpCode
	Payload []byte
	// Compressed says Payload is a permessage-deflate message: inflate it
	// (Inflater), then check its text. Only with SetDeflate.
	Compressed bool
}

// Reader cuts the bytes a connection received into messages and control
// frames. It works on whatever one read() returned, never blocks and holds
// no buffer between messages: an event loop keeps one Reader per
// connection, and the same code serves the server and the load tester's
// clients (the side is a parameter of Next).
type Reader struct {
	msg []byte // fragments of the message in progress
	// seen is how many payload bytes of the incomplete frame at the start
	// of the input were already unmasked (in place) and checked: the caller
	// hands the same bytes again with more after them.
	seen       uint32
	op         OpCode    // opcode of the message in progress; 0: none
	text       utf8State // the UTF-8 check of the text message in progress
	deflate    bool      // permessage-deflate was negotiated
	compressed bool      // the message in progress is compressed
}

// SetDeflate says whether permessage-deflate was negotiated: then the first
// frame of a data message may have RSV1 set, and such a message comes out
// whole with Frame.Compressed.
func (r *Reader) SetDeflate(on bool) { r.deflate = on }

// Next takes the next frame from data, unmasking it in place. n is the
// number of bytes it used: 0 when data does not hold a whole frame yet, and
// then need is the size of that frame when its header is known (0
// otherwise). A frame that is only a fragment of a message is used with an
// empty Frame (OpCode 0). limit bounds the size of a data message; control
// frames are bounded by the protocol. err is a *ProtocolError, or an error
// of ParseHeader and Header.Validate (code CloseProtocolError).
func (r *Reader) Next(data []byte, side Side, limit int64) (f Frame, n, need int, err error) {
	h, hn, err := ParseHeader(data)
	compressed := false
	if err == nil && hn > 0 {
		if h.Rsv == rsv1 && r.deflate && (h.OpCode == OpText || h.OpCode == OpBinary) {
			compressed, h.Rsv = true, 0
		}
		err = h.Validate(side == ServerSide)
	}
	if err != nil {
		return Frame{}, 0, 0, err
	}
	if hn == 0 {
		return Frame{}, 0, 0, nil
	}
	if !h.OpCode.IsControl() && h.Length+int64(len(r.msg)) > limit {
		return Frame{}, 0, 0, errTooBig // fail before reading it
	}
	switch {
	case (h.OpCode == OpText || h.OpCode == OpBinary) && r.op != 0:
		return Frame{}, 0, 0, errNewInsideFragmented
	case h.OpCode == OpContinuation && r.op == 0:
		return Frame{}, 0, 0, errOrphanContinuation
	}
	if compressed || h.OpCode == OpContinuation && r.compressed {
		return r.nextCompressed(data, h, hn, compressed)
	}
	total := hn + int(h.Length)
	text := h.OpCode == OpText || h.OpCode == OpContinuation && r.op == OpText
	if len(data) < total {
		// Check the text that has come so far: a message that became
		// invalid is refused now, not when its frame is whole.
		if text && len(data) > hn+int(r.seen) {
			if err := r.check(data[hn:], h, int(r.seen), text); err != nil {
				return Frame{}, 0, 0, err
			}
			r.seen = uint32(len(data) - hn)
		}
		return Frame{}, 0, total, nil
	}
	payload := data[hn:total]
	seen := int(r.seen)
	r.seen = 0
	if h.Fin && seen == 0 && (h.OpCode == OpText || h.OpCode == OpBinary) {
		// The common case, a whole message in one frame read at once.
		if h.Masked {
			Mask(payload, h.Mask, 0)
		}
		if text && !utf8.Valid(payload) {
			return Frame{}, 0, 0, errInvalidUTF8
		}
		return Frame{OpCode: h.OpCode, Payload: payload}, total, 0, nil
	}
	if seen < len(payload) {
		if err := r.check(payload, h, seen, text); err != nil {
			return Frame{}, 0, 0, err
		}
	}
	if h.OpCode.IsControl() {
		return Frame{OpCode: h.OpCode, Payload: payload}, total, 0, nil
	}
	if text && h.Fin && !r.text.complete() {
		return Frame{}, 0, 0, errInvalidUTF8
	}
	switch {
	case h.OpCode != OpContinuation && h.Fin: // a whole message whose frame came in pieces
		r.text = 0
		return Frame{OpCode: h.OpCode, Payload: payload}, total, 0, nil
	case h.OpCode != OpContinuation:
		r.op = h.OpCode
		r.msg = append(make([]byte, 0, 2*len(payload)+64), payload...)
		return Frame{}, total, 0, nil
	}
	r.msg = append(r.msg, payload...)
	if !h.Fin {
		return Frame{}, total, 0, nil
	}
	f = Frame{OpCode: r.op, Payload: r.msg}
	r.msg, r.op, r.text = nil, 0, 0
	return f, total, 0, nil
}

// nextCompressed takes a frame of a compressed message: its payload is
// deflate data, checked as text only once inflated.
func (r *Reader) nextCompressed(data []byte, h Header, hn int, first bool) (Frame, int, int, error) {
	total := hn + int(h.Length)
	if len(data) < total {
		return Frame{}, 0, total, nil
	}
	payload := data[hn:total]
	if h.Masked {
		Mask(payload, h.Mask, 0)
	}
	switch {
	case first && h.Fin:
		return Frame{OpCode: h.OpCode, Payload: payload, Compressed: true}, total, 0, nil
	case first:
		r.op, r.compressed = h.OpCode, true
		r.msg = append(make([]byte, 0, 2*len(payload)+64), payload...)
		return Frame{}, total, 0, nil
	}
	r.msg = append(r.msg, payload...)
	if !h.Fin {
		return Frame{}, total, 0, nil
	}
	f := Frame{OpCode: r.op, Payload: r.msg, Compressed: true}
	r.msg, r.op, r.compressed = nil, 0, false
	return f, total, 0, nil
}

// check unmasks payload[from:] in place and, for text, feeds it to the
// UTF-8 check; a frame's first bytes start a new check when they start a
// new message.
func (r *Reader) check(payload []byte, h Header, from int, text bool) error {
	b := payload[from:]
	if h.Masked {
		Mask(b, h.Mask, from)
	}
	if !text {
		return nil
	}
	if from == 0 && h.OpCode == OpText {
		r.text = 0
	}
	var ok bool
	if r.text, ok = r.text.feed(b); !ok {
		return errInvalidUTF8
	}
	return nil
}

// Reset drops a message in progress.
func (r *Reader) Reset() { r.msg, r.op, r.seen, r.text, r.compressed = nil, 0, 0, 0, false }

// Pending reports whether a fragmented message is in progress.
func (r *Reader) Pending() bool { return r.op != 0 }

// CodeOf returns the close code to fail a connection with after err, an
// error of Next.
func CodeOf(err error) StatusCode {
	if pe, ok := err.(*ProtocolError); ok {
		return pe.Code
	}
	return CloseProtocolError
}
