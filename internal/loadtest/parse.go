package loadtest

import "bytes"

// frameFields holds the few top-level fields of a server frame the load
// tester needs. String fields alias the frame's bytes (raw, not unescaped:
// the values read here never need escapes).
type frameFields struct {
	typ       []byte
	room      []byte
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
