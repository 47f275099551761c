package ws

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
)

// NewClientKey returns a fresh random Sec-WebSocket-Key.
func NewClientKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.StdEncoding.EncodeToString(b[:])
}

// Negotiated is what the two headers a client offers and the server answers
// with, Sec-WebSocket-Protocol and Sec-WebSocket-Extensions, hold ("" for
// none).
type Negotiated struct {
	Protocol   string
	Extensions string
}

// AppendClientHandshake appends the HTTP/1.1 upgrade request a client sends
// to open a WebSocket on path (with query, if any) at host, offering the
// subprotocols and extensions of offer.
func AppendClientHandshake(dst []byte, host, path, key string, offer Negotiated) []byte {
	dst = append(dst, "GET "...)
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	dst = append(dst, "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: "...)
	dst = append(dst, key...)
	dst = append(dst, "\r\nSec-WebSocket-Version: 13\r\n"...)
	if offer.Protocol != "" {
		dst = append(dst, "Sec-WebSocket-Protocol: "...)
		dst = append(dst, offer.Protocol...)
		dst = append(dst, "\r\n"...)
	}
	if offer.Extensions != "" {
		dst = append(dst, "Sec-WebSocket-Extensions: "...)
		dst = append(dst, offer.Extensions...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// HandshakeError describes a refused or malformed upgrade response.
type HandshakeError struct {
	Status int    // HTTP status code, 0 when the response could not be parsed
	Reason string // what was wrong
}

func (e *HandshakeError) Error() string {
	if e.Status != 0 && e.Status != 101 {
		return fmt.Sprintf("ws: server answered the upgrade with HTTP %d", e.Status)
	}
	return "ws: bad upgrade response: " + e.Reason
}

// ErrResponseTooLong is returned by ParseServerHandshake when no complete
// response head arrived within MaxResponseHead bytes.
var ErrResponseTooLong = errors.New("ws: upgrade response head longer than 8 KiB")

// MaxResponseHead bounds the size of an upgrade response head.
const MaxResponseHead = 8 << 10

// ParseServerHandshake checks the server's answer to a client handshake
// sent with key. It returns the size of the response head (the bytes after
// it are WebSocket frames), or 0 when b does not hold the whole head yet.
// Any status other than 101, and a missing or wrong Upgrade, Connection or
// Sec-WebSocket-Accept header, is a *HandshakeError. got holds the
// server's subprotocol and extensions answers.
func ParseServerHandshake(b []byte, key string) (n int, got Negotiated, err error) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > MaxResponseHead {
			return 0, Negotiated{}, ErrResponseTooLong
		}
		return 0, Negotiated{}, nil
	}
	head := b[:end]
	n = end + 4
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	// Status line: HTTP/1.1 101 Switching Protocols
	proto, status, ok := bytes.Cut(line, []byte(" "))
	if !ok || !bytes.HasPrefix(proto, []byte("HTTP/1.")) {
		return 0, Negotiated{}, &HandshakeError{Reason: "no HTTP status line"}
	}
	code, _, _ := bytes.Cut(status, []byte(" "))
	st, err := strconv.Atoi(string(code))
	if err != nil || len(code) != 3 {
		return 0, Negotiated{}, &HandshakeError{Reason: "bad HTTP status"}
	}
	if st != 101 {
		return 0, Negotiated{}, &HandshakeError{Status: st}
	}
	var upgrade, connection, accept bool
	want := AcceptKey(key)
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, Negotiated{}, &HandshakeError{Status: st, Reason: "malformed header line"}
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Upgrade")):
			upgrade = bytes.EqualFold(value, []byte("websocket"))
		case bytes.EqualFold(name, []byte("Connection")):
			connection = hasToken(value, "upgrade")
		case bytes.EqualFold(name, []byte("Sec-WebSocket-Accept")):
			accept = string(value) == want
		case bytes.EqualFold(name, []byte("Sec-WebSocket-Extensions")):
			got.Extensions = string(value)
		case bytes.EqualFold(name, []byte("Sec-WebSocket-Protocol")):
			got.Protocol = string(value)
		}
	}
	switch {
	case !upgrade:
		return 0, Negotiated{}, &HandshakeError{Status: st, Reason: "missing Upgrade: websocket"}
	case !connection:
		return 0, Negotiated{}, &HandshakeError{Status: st, Reason: "missing Connection: Upgrade"}
	case !accept:
		return 0, Negotiated{}, &HandshakeError{Status: st, Reason: "wrong or missing Sec-WebSocket-Accept"}
	}
	return n, got, nil
}

// hasToken reports whether the comma-separated header value v holds token
// (case-insensitive).
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var t []byte
		t, v, _ = bytes.Cut(v, []byte(","))
		if bytes.EqualFold(bytes.TrimSpace(t), []byte(token)) {
			return true
		}
	}
	return false
}
