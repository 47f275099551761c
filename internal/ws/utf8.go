package ws

import "unicode/utf8"

// validPrefix reports how much of b is whole, valid UTF-8, and false when
// b is invalid whatever follows it. The rest, at most 3 bytes, is the
// start of a sequence that the next fragment may complete: so a text
// message is refused at the fragment where it becomes invalid, not at its
// end.
func validPrefix(b []byte) (n int, ok bool) {
	if utf8.Valid(b) {
		return len(b), true
	}
	// Find the lead byte of the last sequence, at most 3 bytes back.
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		c := b[i]
		if c < 0x80 {
			return 0, false // the tail is whole: the invalid part is inside
		}
		if c >= 0xC0 {
			if incomplete(b[i:]) && utf8.Valid(b[:i]) {
				return i, true
			}
			return 0, false
		}
	}
	return 0, false
}

// incomplete reports whether t, which starts with a lead byte, is a proper
// prefix of a valid UTF-8 sequence (RFC 3629, section 4).
func incomplete(t []byte) bool {
	lo, hi := byte(0x80), byte(0xBF) // range of the second byte
	var size int
	switch c := t[0]; {
	case c >= 0xC2 && c <= 0xDF:
		size = 2
	case c == 0xE0:
		size, lo = 3, 0xA0
	case c == 0xED:
		size, hi = 3, 0x9F // no surrogates
	case c >= 0xE1 && c <= 0xEF:
		size = 3
	case c == 0xF0:
		size, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		size = 4
	case c == 0xF4:
		size, hi = 4, 0x8F // nothing above U+10FFFF
	default:
		return false
	}
	if len(t) >= size {
		return false
	}
	for k, c := range t[1:] {
		if k > 0 {
			lo, hi = 0x80, 0xBF
		}
		if c < lo || c > hi {
			return false
		}
	}
	return true
}
