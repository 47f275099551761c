package results

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// EventsHeader is the first line of an events CSV, without its line end.
const EventsHeader = "step,room,message_id,sender_id,client_id,event,unix_us,lag_us"

// EventsFields is the number of fields of an events row.
const EventsFields = 8

// LegacyFields is the number of fields of a row of the older headerless
// format message_id,sender_id,client_id,event,unix_us.
const LegacyFields = 5

// Kind is the event of a row.
type Kind uint8

// Row events.
const (
	Joined   Kind = iota + 1 // a client joined a room (its joined frame arrived)
	Sent                     // a client sent a message; unix_us is the instant it was due
	Received                 // a client received a message
)

// Event names as written in the event column.
const (
	JoinedName   = "Joined"
	SentName     = "Sent"
	ReceivedName = "Received"
)

// String returns the name of k as written in the CSV, or "?".
func (k Kind) String() string {
	switch k {
	case Joined:
		return JoinedName
	case Sent:
		return SentName
	case Received:
		return ReceivedName
	}
	return "?"
}

// ParseKind returns the Kind named by b. It does not allocate.
func ParseKind(b []byte) (Kind, bool) {
	switch string(b) {
	case ReceivedName:
		return Received, true
	case SentName:
		return Sent, true
	case JoinedName:
		return Joined, true
	}
	return 0, false
}

// Event is one row of an events CSV.
type Event struct {
	Step string
	Room string
	// MessageID and SenderID name the message of a Sent or Received row;
	// a Joined row leaves both fields empty.
	MessageID uint64
	SenderID  uint64
	ClientID  uint64
	Kind      Kind
	UnixUS    int64
	LagUS     int64 // -1: the field is empty
}

// AppendEvent appends e as one CSV row, with its line end, to b.
func AppendEvent(b []byte, e *Event) []byte {
	b = append(b, e.Step...)
	b = append(b, ',')
	b = append(b, e.Room...)
	b = append(b, ',')
	if e.Kind != Joined {
		b = strconv.AppendUint(b, e.MessageID, 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, e.SenderID, 10)
	} else {
		b = append(b, ',')
	}
	b = append(b, ',')
	b = strconv.AppendUint(b, e.ClientID, 10)
	b = append(b, ',')
	b = append(b, e.Kind.String()...)
	b = append(b, ',')
	b = strconv.AppendInt(b, e.UnixUS, 10)
	b = append(b, ',')
	if e.LagUS >= 0 {
		b = strconv.AppendInt(b, e.LagUS, 10)
	}
	return append(b, '\n')
}

// ParseEvent parses one row of an events CSV, without its line end. It
// allocates the step and room; analyze has the fast parser for big files.
func ParseEvent(line string) (Event, error) {
	line = strings.TrimSuffix(line, "\r")
	f := strings.Split(line, ",")
	if len(f) != EventsFields {
		return Event{}, fmt.Errorf("%d fields, want %d", len(f), EventsFields)
	}
	e := Event{Step: f[0], Room: f[1], LagUS: -1}
	var ok bool
	if e.Kind, ok = ParseKind([]byte(f[5])); !ok {
		return Event{}, fmt.Errorf("unknown event %q", f[5])
	}
	var errs []error
	u := func(name, s string) uint64 {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("bad %s %q", name, s))
		}
		return v
	}
	i := func(name, s string) int64 {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("bad %s %q", name, s))
		}
		return v
	}
	if e.Kind != Joined {
		e.MessageID = u("message_id", f[2])
		e.SenderID = u("sender_id", f[3])
	}
	e.ClientID = u("client_id", f[4])
	e.UnixUS = i("unix_us", f[6])
	if f[7] != "" {
		e.LagUS = i("lag_us", f[7])
	}
	if err := errors.Join(errs...); err != nil {
		return Event{}, err
	}
	return e, nil
}

// ReadEvents calls fn for every row of the events CSV at path (plain, or
// gzip when the name ends in ".gz"), after checking its header. A malformed
// row is an error naming the file and line.
func ReadEvents(path string, fn func(*Event) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		if line == 1 {
			if h := strings.TrimSuffix(sc.Text(), "\r"); h != EventsHeader {
				return fmt.Errorf("%s: not an events file (header %q)", path, h)
			}
			continue
		}
		e, err := ParseEvent(sc.Text())
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
