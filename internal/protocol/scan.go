package protocol

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON scanner under ParseFrame: it checks syntax and finds where values
// end without decoding them, and never allocates.

// parseUint parses v, a valid JSON number, as an unsigned 64-bit integer
// written without sign, fraction or exponent.
func parseUint(v []byte) (uint64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if !isDigit(c) {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue checks the JSON value at data[i] and returns the offset after it.
func skipValue(data []byte, i int) (int, *Error) {
	if i >= len(data) {
		return 0, errSyntax
	}
	var ok bool
	switch c := data[i]; c {
	case '"':
		i, _, ok = scanString(data, i)
	case '{', '[':
		return skipNested(data, i)
	case 't':
		i, ok = literal(data, i, "true")
	case 'f':
		i, ok = literal(data, i, "false")
	case 'n':
		i, ok = literal(data, i, "null")
	default:
		i, ok = scanNumber(data, i)
	}
	if !ok {
		return 0, errSyntax
	}
	return i, nil
}

func literal(data []byte, i int, lit string) (int, bool) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// skipScalar checks the string, number or literal at data[i].
func skipScalar(data []byte, i int) (int, bool) {
	switch data[i] {
	case '"':
		i, _, ok := scanString(data, i)
		return i, ok
	case 't':
		return literal(data, i, "true")
	case 'f':
		return literal(data, i, "false")
	case 'n':
		return literal(data, i, "null")
	}
	return scanNumber(data, i)
}

// skipNested checks the object or array at data[i], a value of a member of
// the frame's object, and returns the offset after it. It keeps its own
// stack, one bit per level, rather than recursing, so a hostile frame costs
// no goroutine stack.
func skipNested(data []byte, i int) (int, *Error) {
	const maxNested = MaxDepth - 1 // the frame's object is the first level
	var (
		isObj uint64 // bit d: level d is an object
		depth int
		after bool // just past a value: expect ',' or a closing bracket
	)
	// key checks the member name and colon at data[i] and returns the offset
	// of the member's value.
	key := func(i int) (int, bool) {
		if i >= len(data) || data[i] != '"' {
			return 0, false
		}
		i, _, ok := scanString(data, i)
		if !ok {
			return 0, false
		}
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != ':' {
			return 0, false
		}
		return skipSpace(data, i+1), true
	}
	for {
		if !after {
			if i >= len(data) {
				return 0, errSyntax
			}
			c := data[i]
			if c == '{' || c == '[' {
				if depth == maxNested {
					return 0, errTooDeep
				}
				closer := byte(']')
				if c == '{' {
					isObj |= 1 << depth
					closer = '}'
				} else {
					isObj &^= 1 << depth
				}
				depth++
				i = skipSpace(data, i+1)
				if i < len(data) && data[i] == closer {
					i++
					depth--
					if depth == 0 {
						return i, nil
					}
					after = true
					continue
				}
				if c == '{' {
					var ok bool
					if i, ok = key(i); !ok {
						return 0, errSyntax
					}
				}
				continue
			}
			var ok bool
			if i, ok = skipScalar(data, i); !ok {
				return 0, errSyntax
			}
		}
		after = false
		i = skipSpace(data, i)
		if i >= len(data) {
			return 0, errSyntax
		}
		obj := isObj&(1<<(depth-1)) != 0
		switch c := data[i]; {
		case c == ',':
			i = skipSpace(data, i+1)
			if obj {
				var ok bool
				if i, ok = key(i); !ok {
					return 0, errSyntax
				}
			}
		case c == '}' && obj, c == ']' && !obj:
			i++
			depth--
			if depth == 0 {
				return i, nil
			}
			after = true
		default:
			return 0, errSyntax
		}
	}
}

// scanNumber checks the JSON number at data[i] and returns the offset after
// it.
func scanNumber(data []byte, i int) (int, bool) {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return 0, false
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i++
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	default:
		return 0, false
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return 0, false
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return 0, false
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	return i, true
}

// scanString checks the JSON string whose opening quote is data[i]. It
// returns the offset after the closing quote and whether the string holds
// escapes. It does not check UTF-8: the WebSocket layer has.
func scanString(data []byte, i int) (end int, esc, ok bool) {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	i++
	for {
		// Skip eight plain bytes at a time: a byte is special when it is
		// a quote, a backslash or a control character. The lowest flagged
		// byte of each test is exact (borrows only run upwards).
		for i+8 <= len(data) {
			x := binary.LittleEndian.Uint64(data[i:])
			q := x ^ (ones * '"')
			b := x ^ (ones * '\\')
			t := ((x - ones*0x20) &^ x) | ((q - ones) &^ q) | ((b - ones) &^ b)
			if t &= high; t != 0 {
				i += bits.TrailingZeros64(t) >> 3
				break
			}
			i += 8
		}
		if i >= len(data) {
			return 0, false, false
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, esc, true
		case c == '\\':
			esc = true
			if i+1 >= len(data) {
				return 0, false, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return 0, false, false
				}
				if _, ok := hex4(data[i+2 : i+6]); !ok {
					return 0, false, false
				}
				i += 6
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		default:
			i++
		}
	}
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unescape writes the content s of a JSON string, already checked by
// scanString, to dst without its escapes, as encoding/json decodes it (a lone
// surrogate becomes U+FFFD). It returns the length written, or false when
// dst is too small.
func unescape(dst, s []byte) (int, bool) {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			if n == len(dst) {
				return n, false
			}
			dst[n] = c
			n++
			i++
			continue
		}
		var r rune
		switch c := s[i+1]; c {
		case 'u':
			r, _ = hex4(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(utf8.RuneError)
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2, _ = hex4(s[i+2 : i+6])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
		case 'b':
			r, i = '\b', i+2
		case 'f':
			r, i = '\f', i+2
		case 'n':
			r, i = '\n', i+2
		case 'r':
			r, i = '\r', i+2
		case 't':
			r, i = '\t', i+2
		default: // '"', '\\' or '/'
			r, i = rune(c), i+2
		}
		if n+utf8.RuneLen(r) > len(dst) {
			return n, false
		}
		n += utf8.EncodeRune(dst[n:], r)
	}
	return n, true
}
