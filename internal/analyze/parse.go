package analyze

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"

	"github.com/scalechat/scalechat/internal/results"
)

// Event field values with their comma, as the fast parser meets them.
const (
	receivedField = results.ReceivedName + ","
	sentField     = results.SentName + ","
	joinedField   = results.JoinedName + ","
)

// Row is one parsed CSV row. Step and Room alias the input line.
type Row struct {
	Kind     results.Kind
	Step     []byte
	Room     []byte
	StepRoom []byte // "step,room": the bytes of both fields with their comma
	Message  uint64
	Sender   uint64
	Client   uint64
	UnixUS   int64
	LagUS    int64
	HasLag   bool
}

// Parse errors, kept as constants so that the hot path never allocates.
var (
	errFields     = errors.New("wrong number of fields")
	errStep       = errors.New("bad step")
	errRoom       = errors.New("bad room")
	errMessageID  = errors.New("bad message_id")
	errSenderID   = errors.New("bad sender_id")
	errClientID   = errors.New("bad client_id")
	errEvent      = errors.New("unknown event")
	errUnixUS     = errors.New("bad unix_us")
	errLagUS      = errors.New("bad lag_us")
	errOldJoined  = errors.New("event Joined in the older format")
	errEmptyField = errors.New("empty message_id or sender_id")
)

// parseUint parses the decimal digits of b up to the first comma, returning
// the value, the rest after the comma (nil when b held no comma) and the
// number of digits. ok is false for a non-digit or an overflow.
func parseUint(b []byte) (v uint64, rest []byte, n int, ok bool) {
	i := 0
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		if v > (1<<64-1-uint64(c))/10 {
			return 0, nil, 0, false
		}
		v = v*10 + uint64(c)
	}
	if i < len(b) {
		if b[i] != ',' {
			return 0, nil, 0, false
		}
		return v, b[i+1:], i, true
	}
	return v, nil, i, true
}

// ParseRow parses one line of the current format, without its line end.
// It is the whole hand-written parser: no allocation, one pass.
func ParseRow(line []byte, r *Row) error {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	// step
	c1 := bytes.IndexByte(line, ',')
	if c1 <= 0 {
		if c1 < 0 {
			return errFields
		}
		return errStep
	}
	r.Step = line[:c1]
	rest := line[c1+1:]
	c2 := bytes.IndexByte(rest, ',')
	if c2 < 0 {
		return errFields
	}
	if c2 == 0 || c2 > 64 {
		return errRoom
	}
	r.Room = rest[:c2]
	r.StepRoom = line[:c1+1+c2]
	rest = rest[c2+1:]

	var ok bool
	var nMsg, nSender, n int
	r.Message, rest, nMsg, ok = parseUint(rest)
	if !ok || rest == nil {
		if ok {
			return errFields
		}
		return errMessageID
	}
	r.Sender, rest, nSender, ok = parseUint(rest)
	if !ok || rest == nil {
		if ok {
			return errFields
		}
		return errSenderID
	}
	r.Client, rest, n, ok = parseUint(rest)
	if !ok || rest == nil {
		if ok {
			return errFields
		}
		return errClientID
	}
	if n == 0 {
		return errClientID
	}
	rest, err := parseEvent(rest, r)
	if err != nil {
		return err
	}
	var ts uint64
	ts, rest, n, ok = parseUint(rest)
	if !ok || rest == nil {
		if ok {
			return errFields
		}
		return errUnixUS
	}
	if n == 0 || ts > 1<<63-1 {
		return errUnixUS
	}
	r.UnixUS = int64(ts)
	if err := parseLag(rest, r); err != nil {
		return err
	}
	if r.Kind != results.Joined && (nMsg == 0 || nSender == 0) {
		return errEmptyField
	}
	if r.Kind != results.Received { // the room of a Received row is not used: skip the check on the hot path
		if !validRoom(r.Room) {
			return errRoom
		}
		if !validStep(r.Step) {
			return errStep
		}
	}
	return nil
}

// parseLag reads the last field, lag_us: empty, or a signed integer.
func parseLag(b []byte, r *Row) error {
	r.HasLag = false
	if len(b) == 0 {
		return nil
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	lag, rest, n, ok := parseUint(b)
	if !ok || rest != nil || n == 0 || lag > 1<<63-1 {
		if ok && rest != nil {
			return errFields
		}
		return errLagUS
	}
	r.LagUS = int64(lag)
	if neg {
		r.LagUS = -r.LagUS
	}
	r.HasLag = true
	return nil
}

// parseEvent reads the event field and its comma.
func parseEvent(b []byte, r *Row) ([]byte, error) {
	switch {
	case len(b) >= len(receivedField) && string(b[:len(receivedField)]) == receivedField:
		r.Kind = results.Received
		return b[len(receivedField):], nil
	case len(b) >= len(sentField) && string(b[:len(sentField)]) == sentField:
		r.Kind = results.Sent
		return b[len(sentField):], nil
	case len(b) >= len(joinedField) && string(b[:len(joinedField)]) == joinedField:
		r.Kind = results.Joined
		return b[len(joinedField):], nil
	}
	if bytes.IndexByte(b, ',') < 0 {
		return nil, errFields
	}
	return nil, errEvent
}

// ParseOldRow parses one line of the older headerless five-column format
// message_id,sender_id,client_id,event,unix_us. The ids of senders and
// clients are any non-empty text without a comma (the original client wrote
// UUIDs): see oldID. A row with message_id 0 and no sender is not a chat
// event (a client that knows only chat frames recording a control frame)
// and gets ErrIgnored.
func ParseOldRow(line []byte, r *Row) error {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	r.Step, r.Room, r.StepRoom = nil, nil, nil
	r.HasLag = false
	var ok bool
	var n int
	rest := line
	r.Message, rest, n, ok = parseUint(rest)
	if !ok || rest == nil || n == 0 {
		if ok && rest == nil {
			return errFields
		}
		return errMessageID
	}
	r.Sender, rest, n = oldID(rest)
	if rest == nil {
		return errFields
	}
	noSender := n == 0
	r.Client, rest, n = oldID(rest)
	if rest == nil {
		return errFields
	}
	if n == 0 {
		return errClientID
	}
	rest, err := parseEvent(rest, r)
	if err != nil {
		return err
	}
	if r.Kind == results.Joined {
		return errOldJoined
	}
	var ts uint64
	ts, rest, n, ok = parseUint(rest)
	if !ok || n == 0 || ts > 1<<63-1 {
		return errUnixUS
	}
	if rest != nil {
		return errFields
	}
	r.UnixUS = int64(ts)
	if noSender {
		if r.Message == 0 {
			return ErrIgnored
		}
		return errSenderID
	}
	return nil
}

// ErrIgnored marks a row that is well formed but not a chat event.
var ErrIgnored = errors.New("not a chat event")

// oldID reads an id field of the older format up to its comma: the value of
// a decimal number, else a 64-bit hash of the text (a UUID, a name). It
// returns the rest after the comma (nil when there is none) and the field's
// length. Two different texts share a hash with a probability of about
// n²/2⁶⁵ for n ids: 3·10⁻⁸ for a million clients.
func oldID(b []byte) (v uint64, rest []byte, n int) {
	i := bytes.IndexByte(b, ',')
	if i < 0 {
		return 0, nil, 0
	}
	f := b[:i]
	if v, r, k, ok := parseUint(b); ok && k == i && r != nil {
		return v, r, i
	}
	return hashID(f), b[i+1:], i
}

// hashID hashes an id's text eight bytes at a time (multiply and fold, as in
// wyhash): ids are short and this runs once per row.
func hashID(b []byte) uint64 {
	const m1, m2 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db
	h := uint64(len(b)) ^ m1
	for len(b) >= 8 {
		hi, lo := bits.Mul64(h^binary.LittleEndian.Uint64(b), m2)
		h = hi ^ lo
		b = b[8:]
	}
	var t uint64
	for i, c := range b {
		t |= uint64(c) << (8 * i)
	}
	hi, lo := bits.Mul64(h^t^m1, m2)
	return hi ^ lo ^ 1<<63 // the top bit keeps hashed ids away from small numeric ones
}

// validRoom checks [A-Za-z0-9._-]{1,64}.
func validRoom(b []byte) bool {
	if len(b) == 0 || len(b) > 64 {
		return false
	}
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// validStep rejects what docs/csv.md forbids in a step name.
func validStep(b []byte) bool {
	return len(b) > 0 && bytes.IndexByte(b, '"') < 0 && bytes.IndexByte(b, '\r') < 0
}
