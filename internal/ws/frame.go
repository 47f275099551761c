// Package ws implements the parts of the WebSocket protocol (RFC 6455) that
// scalechat's connections need: frame headers, masking, close payloads and
// the opening handshake keys.
//
// It works on byte slices rather than io.Reader so that an event loop can
// parse whatever one read() returned without blocking and without holding a
// goroutine or a buffer per connection.
package ws

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
)

// OpCode is the 4-bit frame opcode.
type OpCode byte

// Frame opcodes (RFC 6455 section 5.2).
const (
	OpContinuation OpCode = 0x0
	OpText         OpCode = 0x1
	OpBinary       OpCode = 0x2
	OpClose        OpCode = 0x8
	OpPing         OpCode = 0x9
	OpPong         OpCode = 0xA
)

// String returns the opcode's name in RFC 6455, or its number.
func (o OpCode) String() string {
	switch o {
	case OpContinuation:
		return "continuation"
	case OpText:
		return "text"
	case OpBinary:
		return "binary"
	case OpClose:
		return "close"
	case OpPing:
		return "ping"
	case OpPong:
		return "pong"
	}
	return "0x" + strconv.FormatUint(uint64(o), 16)
}

// IsControl reports whether o is a control opcode (close, ping, pong or a
// reserved control opcode).
func (o OpCode) IsControl() bool { return o&0x8 != 0 }

// IsReserved reports whether o is one of the opcodes RFC 6455 leaves
// undefined (0x3-0x7 and 0xB-0xF).
func (o OpCode) IsReserved() bool {
	switch o {
	case OpContinuation, OpText, OpBinary, OpClose, OpPing, OpPong:
		return false
	}
	return true
}

// MaxControlPayload is the largest payload a control frame may carry.
const MaxControlPayload = 125

// MaxHeaderSize is the size of the largest frame header: 2 bytes, an 8-byte
// extended length and a 4-byte masking key.
const MaxHeaderSize = 14

// Header is a decoded frame header.
type Header struct {
	Fin    bool
	Rsv    byte // the three RSV bits, in the low bits
	OpCode OpCode
	Masked bool
	Mask   [4]byte
	Length int64
}

// ErrLengthOverflow reports a 64-bit payload length with its most
// significant bit set, which RFC 6455 forbids.
var ErrLengthOverflow = errors.New("ws: frame length overflows 63 bits")

// ErrNonMinimalLength reports a payload length encoded in more bytes than
// it needs, which RFC 6455 section 5.2 forbids: "the minimal number of bytes
// MUST be used to encode the length". A protocol error (close code 1002).
var ErrNonMinimalLength = errors.New("ws: frame length not minimally encoded")

// ParseHeader decodes the frame header at the start of b. It returns the
// header and its encoded size, or size 0 when b does not hold a whole header
// yet. A length that overflows 63 bits or is not minimally encoded is an
// error (ErrLengthOverflow, ErrNonMinimalLength), found as soon as the
// length's bytes are in, before the mask. It does not judge the header against the rules of a connection (RSV
// bits, masking, control frame limits): see Header.Validate.
func ParseHeader(b []byte) (h Header, n int, err error) {
	if len(b) < 2 {
		return h, 0, nil
	}
	h.Fin = b[0]&0x80 != 0
	h.Rsv = (b[0] >> 4) & 0x7
	h.OpCode = OpCode(b[0] & 0x0f)
	h.Masked = b[1]&0x80 != 0
	n = 2
	switch l := b[1] & 0x7f; l {
	case 126:
		if len(b) < 4 {
			return h, 0, nil
		}
		h.Length = int64(binary.BigEndian.Uint16(b[2:4]))
		if h.Length < 126 {
			return h, 0, ErrNonMinimalLength
		}
		n = 4
	case 127:
		if len(b) < 10 {
			return h, 0, nil
		}
		u := binary.BigEndian.Uint64(b[2:10])
		if u > math.MaxInt64 {
			return h, 0, ErrLengthOverflow
		}
		if u <= math.MaxUint16 {
			return h, 0, ErrNonMinimalLength
		}
		h.Length = int64(u)
		n = 10
	default:
		h.Length = int64(l)
	}
	if h.Masked {
		if len(b) < n+4 {
			return h, 0, nil
		}
		copy(h.Mask[:], b[n:n+4])
		n += 4
	}
	return h, n, nil
}

// Errors returned by Header.Validate. Each is a protocol error (close code
// 1002).
var (
	ErrReservedBits      = errors.New("ws: reserved bits set without a negotiated extension")
	ErrReservedOpCode    = errors.New("ws: reserved opcode")
	ErrFragmentedControl = errors.New("ws: fragmented control frame")
	ErrControlTooLong    = errors.New("ws: control frame payload longer than 125 bytes")
	ErrUnmasked          = errors.New("ws: client frame is not masked")
	ErrMasked            = errors.New("ws: server frame is masked")
)

// Validate checks h against the rules every endpoint enforces. fromClient
// says which side sent the frame: client frames must be masked, server
// frames must not be.
func (h Header) Validate(fromClient bool) error {
	switch {
	case h.Rsv != 0:
		return ErrReservedBits
	case h.OpCode.IsReserved():
		return ErrReservedOpCode
	case h.OpCode.IsControl() && !h.Fin:
		return ErrFragmentedControl
	case h.OpCode.IsControl() && h.Length > MaxControlPayload:
		return ErrControlTooLong
	case fromClient && !h.Masked:
		return ErrUnmasked
	case !fromClient && h.Masked:
		return ErrMasked
	}
	return nil
}

// HeaderSize returns the encoded size of a header for a payload of the given
// length.
func HeaderSize(length int, masked bool) int {
	n := 2
	switch {
	case length > math.MaxUint16:
		n += 8
	case length > 125:
		n += 2
	}
	if masked {
		n += 4
	}
	return n
}

// AppendHeader appends the encoding of h to dst.
func AppendHeader(dst []byte, h Header) []byte {
	b0 := h.Rsv<<4 | byte(h.OpCode&0x0f)
	if h.Fin {
		b0 |= 0x80
	}
	var b1 byte
	if h.Masked {
		b1 = 0x80
	}
	switch {
	case h.Length > math.MaxUint16:
		dst = append(dst, b0, b1|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(h.Length))
	case h.Length > 125:
		dst = append(dst, b0, b1|126)
		dst = binary.BigEndian.AppendUint16(dst, uint16(h.Length))
	default:
		dst = append(dst, b0, b1|byte(h.Length))
	}
	if h.Masked {
		dst = append(dst, h.Mask[:]...)
	}
	return dst
}

// AppendFrame appends an unmasked frame (as a server sends it) to dst.
func AppendFrame(dst []byte, op OpCode, fin bool, payload []byte) []byte {
	dst = AppendHeader(dst, Header{Fin: fin, OpCode: op, Length: int64(len(payload))})
	return append(dst, payload...)
}

// AppendMaskedFrame appends a frame masked with key (as a client sends it)
// to dst. payload is not modified.
func AppendMaskedFrame(dst []byte, op OpCode, fin bool, payload []byte, key [4]byte) []byte {
	dst = AppendHeader(dst, Header{Fin: fin, OpCode: op, Masked: true, Mask: key, Length: int64(len(payload))})
	start := len(dst)
	dst = append(dst, payload...)
	Mask(dst[start:], key, 0)
	return dst
}

// Mask XORs b in place with key, starting at offset pos of the key stream,
// and returns the offset after b. Masking twice with the same key and
// offset restores the data, so Mask also unmasks.
func Mask(b []byte, key [4]byte, pos int) int {
	if len(b) == 0 {
		return pos
	}
	k := [4]byte{key[pos&3], key[(pos+1)&3], key[(pos+2)&3], key[(pos+3)&3]}
	k32 := binary.LittleEndian.Uint32(k[:])
	k64 := uint64(k32)<<32 | uint64(k32)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		v := binary.LittleEndian.Uint64(b[i:])
		binary.LittleEndian.PutUint64(b[i:], v^k64)
	}
	for ; i < len(b); i++ {
		b[i] ^= k[i&3]
	}
	return pos + len(b)
}

// TextFrame returns a new unmasked text frame holding payload, in a buffer
// of exactly its size: frames outlive the call in queues and histories.
func TextFrame(payload []byte) []byte {
	frame := make([]byte, 0, HeaderSize(len(payload), false)+len(payload))
	return AppendFrame(frame, OpText, true, payload)
}
