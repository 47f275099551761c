package ws

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"
)

// StatusCode is a close status code (RFC 6455 section 7.4).
type StatusCode uint16

// Close codes scalechat sends or must recognise.
const (
	CloseNormal             StatusCode = 1000
	CloseGoingAway          StatusCode = 1001
	CloseProtocolError      StatusCode = 1002
	CloseUnsupportedData    StatusCode = 1003
	CloseNoStatus           StatusCode = 1005 // never on the wire: the peer sent no code
	CloseAbnormal           StatusCode = 1006 // never on the wire: no close frame at all
	CloseInvalidPayload     StatusCode = 1007
	ClosePolicyViolation    StatusCode = 1008
	CloseMessageTooBig      StatusCode = 1009
	CloseMandatoryExtension StatusCode = 1010
	CloseInternalError      StatusCode = 1011
	CloseServiceRestart     StatusCode = 1012
	CloseTryAgainLater      StatusCode = 1013
)

// ValidOnWire reports whether a peer may send code in a close frame.
func (c StatusCode) ValidOnWire() bool {
	switch {
	case c >= 1000 && c <= 1003, c >= 1007 && c <= 1014:
		return true
	case c >= 3000 && c <= 4999:
		return true
	}
	return false
}

// Errors returned by ParseClosePayload. Each is a protocol error.
var (
	ErrCloseLength = errors.New("ws: close payload of one byte")
	ErrCloseCode   = errors.New("ws: invalid close code")
	ErrCloseReason = errors.New("ws: close reason is not valid UTF-8")
)

// ParseClosePayload decodes the payload of a close frame. An empty payload
// yields CloseNoStatus.
func ParseClosePayload(p []byte) (code StatusCode, reason []byte, err error) {
	switch len(p) {
	case 0:
		return CloseNoStatus, nil, nil
	case 1:
		return 0, nil, ErrCloseLength
	}
	code = StatusCode(binary.BigEndian.Uint16(p))
	if !code.ValidOnWire() {
		return code, nil, ErrCloseCode
	}
	reason = p[2:]
	if !utf8.Valid(reason) {
		return code, nil, ErrCloseReason
	}
	return code, reason, nil
}

// AppendClosePayload appends a close payload with code and reason to dst,
// cutting reason so that the payload fits in a control frame.
func AppendClosePayload(dst []byte, code StatusCode, reason string) []byte {
	if len(reason) > MaxControlPayload-2 {
		reason = reason[:MaxControlPayload-2]
		for len(reason) > 0 && !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	return append(dst, reason...)
}

// AppendCloseFrame appends an unmasked close frame to dst.
func AppendCloseFrame(dst []byte, code StatusCode, reason string) []byte {
	var p [MaxControlPayload]byte
	return AppendFrame(dst, OpClose, true, AppendClosePayload(p[:0], code, reason))
}

// CloseReply returns the code an endpoint answers a peer's close frame
// with (RFC 6455 sections 5.5.1 and 7.4): the peer's own code, 1000 when it
// gave none, 1002 for a payload that is no close payload (one byte, a code
// no peer may send), 1007 for a reason that is not UTF-8; and the peer's
// code (CloseNoStatus when it gave none) with the error, if any.
func CloseReply(p []byte) (reply, code StatusCode, err error) {
	code, _, err = ParseClosePayload(p)
	switch {
	case errors.Is(err, ErrCloseReason):
		return CloseInvalidPayload, code, err
	case err != nil:
		return CloseProtocolError, code, err
	case code == CloseNoStatus:
		return CloseNormal, code, nil
	}
	return code, code, nil
}
