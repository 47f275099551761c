package broker

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A room's history stream holds entries of one message or of several with
// consecutive seqs. persist.lua writes each run of a room's messages in one call as one entry, so that storing a
// round of a room costs Redis one XADD and the script never reads a
// message. An entry's id is "<seq>-1", seq being its last message's; its
// one field is m, that message, or ms, the run's messages in seq order,
// each as <length in decimal>:<bytes> (runValue).

// runValue is the ms field of an entry holding msgs, in seq order.
func runValue(msgs [][]byte) []byte {
	n := 0
	for _, m := range msgs {
		n += len(m) + 8
	}
	v := make([]byte, 0, n)
	for _, m := range msgs {
		v = strconv.AppendInt(v, int64(len(m)), 10)
		v = append(v, ':')
		v = append(v, m...)
	}
	return v
}

// appendEntry appends the messages of the stream entry e to into in seq
// order, those at or below into's last seq left out: a run persist.lua
// wrote after a follower's fill.lua may begin below the stream's entry
// before it (the same messages: one epoch, one message a seq). An entry
// that is not one of the room's (a bad id, field or framing) adds nothing.
func appendEntry(into []Entry, e redis.XMessage) []Entry {
	n := len(into)
	into = appendMessages(into, e)
	if n == 0 {
		return into
	}
	k := n
	for k < len(into) && into[k].Seq <= into[n-1].Seq {
		k++
	}
	return append(into[:n], into[k:]...)
}

// appendMessages appends the messages of the stream entry e to into in seq
// order; none when it is not one of the room's.
func appendMessages(into []Entry, e redis.XMessage) []Entry {
	i := strings.IndexByte(e.ID, '-')
	if i < 0 {
		return into
	}
	last, err := strconv.ParseUint(e.ID[:i], 10, 64)
	if err != nil || last == 0 {
		return into
	}
	if m, ok := e.Values["m"].(string); ok {
		return append(into, Entry{Seq: last, Payload: []byte(m)})
	}
	ms, ok := e.Values["ms"].(string)
	if !ok {
		return into
	}
	msgs, ok := splitRun([]byte(ms))
	if !ok || uint64(len(msgs)) > last {
		return into
	}
	first := last - uint64(len(msgs)) + 1
	for k, m := range msgs {
		into = append(into, Entry{Seq: first + uint64(k), Payload: m})
	}
	return into
}

// splitRun is runValue's inverse; false when v is not one.
func splitRun(v []byte) ([][]byte, bool) {
	var msgs [][]byte
	for len(v) > 0 {
		c := bytes.IndexByte(v, ':')
		if c <= 0 {
			return nil, false
		}
		n, err := strconv.Atoi(string(v[:c]))
		if err != nil || n < 0 || n > len(v)-c-1 {
			return nil, false
		}
		msgs = append(msgs, v[c+1:c+1+n])
		v = v[c+1+n:]
	}
	return msgs, len(msgs) > 0
}

// streamEntries returns the messages of the stream entries es, given in
// stream order (oldest first), in seq order.
func streamEntries(es []redis.XMessage) []Entry {
	var out []Entry
	for _, e := range es {
		out = appendEntry(out, e)
	}
	return out
}

// latest returns the newest n messages of the stream entries es, given
// newest first (XREVRANGE), in seq order.
func latest(es []redis.XMessage, n int) []Entry {
	var out []Entry
	for i := len(es) - 1; i >= 0; i-- {
		out = appendEntry(out, es[i])
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
