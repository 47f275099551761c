package ws

import (
	"crypto/sha1"
	"encoding/base64"
)

// keyGUID is the fixed GUID of RFC 6455 section 1.3.
const keyGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// AcceptKey returns the Sec-WebSocket-Accept value for a client's
// Sec-WebSocket-Key.
func AcceptKey(clientKey string) string {
	h := sha1.New()
	h.Write([]byte(clientKey))
	h.Write([]byte(keyGUID))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// ValidClientKey reports whether key is a base64-encoded 16-byte value, as
// RFC 6455 requires of Sec-WebSocket-Key.
func ValidClientKey(key string) bool {
	if len(key) != 24 {
		return false
	}
	var b [18]byte
	n, err := base64.StdEncoding.Decode(b[:], []byte(key))
	return err == nil && n == 16
}
