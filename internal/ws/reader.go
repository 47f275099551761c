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
}

// Reader cuts the bytes a connection received into messages and control
// frames. It works on whatever one read() returned, never blocks and holds
// no buffer between messages: an event loop keeps one Reader per
// connection, and the same code serves the server and the load tester's
// clients (the side is a parameter of Next).
type Reader struct {
	msg     []byte // fragments of the message in progress
	checked uint32 // msg[:checked] is known to be valid UTF-8 (text messages)
	op      OpCode // opcode of the message in progress; 0: none
}

// Next takes the next frame from data, unmasking it in place. n is the
// number of bytes it used: 0 when data does not hold a whole frame yet, and
// then need is the size of that frame when its header is known (0
// otherwise). A frame that is only a fragment of a message is used with an
// empty Frame (OpCode 0). limit bounds the size of a data message; control
// frames are bounded by the protocol. err is a *ProtocolError, or an error
// of ParseHeader and Header.Validate (code CloseProtocolError).
func (r *Reader) Next(data []byte, side Side, limit int64) (f Frame, n, need int, err error) {
	h, hn, err := ParseHeader(data)
	if err == nil && hn > 0 {
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
	total := hn + int(h.Length)
	if len(data) < total {
		return Frame{}, 0, total, nil
	}
	payload := data[hn:total]
	if h.Masked {
		Mask(payload, h.Mask, 0)
	}
	switch h.OpCode {
	case OpText, OpBinary:
		if r.op != 0 {
			return Frame{}, 0, 0, errNewInsideFragmented
		}
		if h.Fin {
			if h.OpCode == OpText && !utf8.Valid(payload) {
				return Frame{}, 0, 0, errInvalidUTF8
			}
			return Frame{h.OpCode, payload}, total, 0, nil
		}
		r.op = h.OpCode
		r.msg = append(make([]byte, 0, 2*len(payload)+64), payload...)
		r.checked = 0
	case OpContinuation:
		if r.op == 0 {
			return Frame{}, 0, 0, errOrphanContinuation
		}
		r.msg = append(r.msg, payload...)
	default:
		return Frame{h.OpCode, payload}, total, 0, nil
	}
	if r.op == OpText {
		n, ok := validPrefix(r.msg[r.checked:])
		if !ok || h.Fin && int(r.checked)+n < len(r.msg) {
			return Frame{}, 0, 0, errInvalidUTF8
		}
		r.checked += uint32(n)
	}
	if !h.Fin {
		return Frame{}, total, 0, nil
	}
	f = Frame{r.op, r.msg}
	r.msg, r.op = nil, 0
	return f, total, 0, nil
}

// Reset drops a message in progress.
func (r *Reader) Reset() { r.msg, r.op = nil, 0 }

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
