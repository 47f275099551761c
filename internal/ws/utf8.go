package ws

import "encoding/binary"

// utf8State is where a streaming UTF-8 check stands: the continuation bytes
// the current sequence still needs (bits 3 and up) and the range the next
// one must fall in (bits 0-2, an index of nextRange). The zero value is
// "between sequences". Fed fragment by fragment, and within a frame read by
// read, it refuses a text at the byte where it becomes invalid (RFC 3629),
// which is what lets the connection be failed at once.
type utf8State uint8

// nextRange holds the allowed range of the byte after a lead byte: most
// leads take 80-BF, E0 takes A0-BF (no overlong forms), ED 80-9F (no
// surrogates), F0 90-BF (no overlong forms), F4 80-8F (nothing above
// U+10FFFF).
var nextRange = [5][2]byte{{0x80, 0xBF}, {0xA0, 0xBF}, {0x80, 0x9F}, {0x90, 0xBF}, {0x80, 0x8F}}

// feed checks b after what s has seen and returns the new state, or false
// when the text is not UTF-8 whatever follows.
func (s utf8State) feed(b []byte) (utf8State, bool) {
	i := 0
	for i < len(b) {
		if s == 0 {
			for i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:])&0x8080808080808080 == 0 {
				i += 8 // ASCII, eight at a time
			}
			if i == len(b) {
				break
			}
			c := b[i]
			i++
			switch {
			case c < 0x80:
			case c >= 0xC2 && c <= 0xDF:
				s = 1 << 3
			case c == 0xE0:
				s = 2<<3 | 1
			case c == 0xED:
				s = 2<<3 | 2
			case c >= 0xE1 && c <= 0xEF:
				s = 2 << 3
			case c == 0xF0:
				s = 3<<3 | 3
			case c >= 0xF1 && c <= 0xF3:
				s = 3 << 3
			case c == 0xF4:
				s = 3<<3 | 4
			default:
				return s, false
			}
			continue
		}
		c := b[i]
		i++
		if r := nextRange[s&7]; c < r[0] || c > r[1] {
			return s, false
		}
		s = (s>>3 - 1) << 3
	}
	return s, true
}

// complete reports whether the text seen ends between sequences.
func (s utf8State) complete() bool { return s == 0 }
