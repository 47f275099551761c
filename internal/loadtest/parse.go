//go:build linux

package loadtest

import (
	"bytes"
	"time"
)

// frameFields holds the few top-level fields of a server frame the load
// tester needs. String fields alias the frame's bytes (raw, not unescaped:
// the values read here never need escapes).
type frameFields struct {
	typ       []byte
	room      []byte
	sender    []byte
	sentAt    []byte // a string's bytes, or a number's
	seq       uint64
	messageID uint64
	dueUs     uint64
	hasType   bool
	hasSeq    bool
	hasID     bool
	hasDue    bool
}

// parseFields scans one JSON object and picks out type, room, seq,
// message_id and due_us without allocating. It reports false for anything
// that is not a well-formed object at the top level; values it does not
// need are skipped, not validated in depth.
func parseFields(b []byte, f *frameFields) bool {
	*f = frameFields{}
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		end := stringEnd(b, i)
		if end < 0 {
			return false
		}
		key := b[i+1 : end]
		i = skipWS(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return false
		}
		vstart := i
		switch b[i] {
		case '"':
			e := stringEnd(b, i)
			if e < 0 {
				return false
			}
			switch string(key) {
			case "type":
				f.typ, f.hasType = b[i+1:e], true
			case "room":
				f.room = b[i+1 : e]
			case "sender":
				f.sender = b[i+1 : e]
			case "sent_at":
				f.sentAt = b[i+1 : e]
			case "message_id": // as a string where numbers are doubles (socketio)
				f.messageID, f.hasID = parseUint(b[i+1 : e])
			}
			i = e + 1
		case '{', '[':
			e := skipNested(b, i)
			if e < 0 {
				return false
			}
			i = e
		default:
			for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
				i++
			}
			v := b[vstart:i]
			switch string(key) {
			case "seq":
				f.seq, f.hasSeq = parseUint(v)
			case "message_id":
				f.messageID, f.hasID = parseUint(v)
			case "due_us":
				f.dueUs, f.hasDue = parseUint(v)
			case "sent_at":
				f.sentAt = v
			}
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index of the quote closing the string that opens at
// b[i], or -1.
func stringEnd(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		j = q + 1
	}
}

// skipNested returns the index after the object or array opening at b[i],
// or -1.
func skipNested(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			e := stringEnd(b, i)
			if e < 0 {
				return -1
			}
			i = e
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return -1
}

func parseUint(v []byte) (uint64, bool) {
	if len(v) == 0 || len(v) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// objectField returns the raw value of the top-level key of the JSON object
// b (a string's value without its quotes), or false. Values are skipped,
// not validated in depth.
func objectField(b []byte, key string) ([]byte, bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = skipWS(b, i+1)
	for i < len(b) && b[i] == '"' {
		end := stringEnd(b, i)
		if end < 0 {
			return nil, false
		}
		k := b[i+1 : end]
		i = skipWS(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return nil, false
		}
		start := i
		var v []byte
		switch b[i] {
		case '"':
			e := stringEnd(b, i)
			if e < 0 {
				return nil, false
			}
			v, i = b[i+1:e], e+1
		case '{', '[':
			e := skipNested(b, i)
			if e < 0 {
				return nil, false
			}
			v, i = b[start:e], e
		default:
			for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
				i++
			}
			v = b[start:i]
		}
		if string(k) == key {
			return v, true
		}
		i = skipWS(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return nil, false
}

// parseTime reads a due time written as unix microseconds or as RFC 3339
// (UTC as time.RFC3339Nano writes it, the legacy adapter's sent_at after
// the server's round trip, is read without time.Parse).
func parseTime(v []byte) (int64, bool) {
	if n, ok := parseUint(v); ok {
		return int64(n), true
	}
	if us, ok := parseUTC(v); ok {
		return us, true
	}
	t, err := time.Parse(time.RFC3339Nano, string(v))
	if err != nil {
		return 0, false
	}
	return t.UnixMicro(), true
}

// parseUTC reads 2026-11-23T10:37:07Z with 0 to 9 fraction digits
// (2026-11-23T10:37:07.12345Z) as unix microseconds.
func parseUTC(v []byte) (int64, bool) {
	n := len(v)
	if n < 20 || v[n-1] != 'Z' || v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' || v[16] != ':' {
		return 0, false
	}
	ns := 0
	if frac := v[19 : n-1]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return 0, false
		}
		f, ok := parseUint(frac[1:])
		if !ok {
			return 0, false
		}
		ns = int(f)
		for range 10 - len(frac) {
			ns *= 10
		}
	}
	num := func(a, b int) (int, bool) {
		x, ok := parseUint(v[a:b])
		return int(x), ok
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 7)
	d, ok3 := num(8, 10)
	h, ok4 := num(11, 13)
	mi, ok5 := num(14, 16)
	s, ok6 := num(17, 19)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return 0, false
	}
	return time.Date(y, time.Month(mo), d, h, mi, s, ns, time.UTC).UnixMicro(), true
}
