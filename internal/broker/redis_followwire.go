package broker

import (
	"errors"
	"strconv"
)

// The records of the owner protocol (docs/cluster.md, "One owner per
// room"): what nodes send each other on their node channels when a room's
// owner orders its messages itself and other nodes follow it. A payload is
// followMark and then records, one after the other, each a kind byte and
// its fields, every field length-prefixed (<len>:<bytes>): a node gets all
// of a round's records from one node in one PUBLISH, and in the order they
// were queued. Nothing else goes on a node's channel: a payload without
// followMark is dropped (the Redis order's batches, before its removal).
const followMark = '!'

// The kinds of record and their fields.
const (
	recMessage  = 'M' // room, seq, json: an ordered message, to a follower
	recAck      = 'A' // req, seq: a forwarded publish's seq (0: refused), to its node
	recBusy     = 'B' // req: a forwarded publish refused by an owner past its capacity, to its node
	recSnapshot = 'L' // room, epoch, seq, n, then n × (seq, json): the room as a new follower loads it
	recFollow   = 'F' // room, node: node follows the room, to its owner
	recUnfollow = 'U' // room, node: node no longer follows the room, to its owner
	recForward  = 'P' // room, node, req, prefix, suffix: a follower's publish, to the owner
	recNotOwner = 'N' // room: the node asked does not own the room (any more), to a follower
	recOwn      = 'O' // room, seq, n, then n × node: the room is now the receiver's, with these followers (handover.lua)
	recOwner    = 'W' // room, node: the room's owner is now node, to its other followers (handover.lua)
	recDropped  = 'D' // room, node: node, the owner, dropped the room (its stream ended there), to its followers
	recMark     = 'K' // req: a mark a node sends itself; back, every record sent to it before has been read (unheard)
	recTime     = 'T' // nanos: when the sender made the round (unix nanoseconds), first in a round's payload (redis_transit.go)
)

// followRec is one decoded record; which fields are set depends on kind.
type followRec struct {
	kind           byte
	room, node     string
	epoch          string
	seq, req       uint64
	json           string
	prefix, suffix string
	tail           []Entry
	nodes          []string
}

var errBadFollow = errors.New("malformed owner-protocol record on the node's channel")

// appendField appends s length-prefixed.
func appendField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

func appendBytesField(b, s []byte) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

func appendUint(b []byte, n uint64) []byte {
	var tmp [20]byte
	return appendBytesField(b, strconv.AppendUint(tmp[:0], n, 10))
}

// encMessage is a recMessage.
func encMessage(room string, seq uint64, json []byte) []byte {
	return appendMessage(make([]byte, 0, len(room)+len(json)+16), room, seq, json)
}

// appendMessage appends a recMessage to b.
func appendMessage(b []byte, room string, seq uint64, json []byte) []byte {
	b = append(b, recMessage)
	b = appendField(b, room)
	b = appendUint(b, seq)
	return appendBytesField(b, json)
}

func encAck(req, seq uint64) []byte {
	b := append(make([]byte, 0, 24), recAck)
	return appendUint(appendUint(b, req), seq)
}

func encBusy(req uint64) []byte {
	return appendUint(append(make([]byte, 0, 12), recBusy), req)
}

func encMark(req uint64) []byte {
	return appendUint(append(make([]byte, 0, 12), recMark), req)
}

func encRoomNode(kind byte, room, node string) []byte {
	b := append(make([]byte, 0, len(room)+len(node)+8), kind)
	return appendField(appendField(b, room), node)
}

func encNotOwner(room string) []byte {
	return appendField(append(make([]byte, 0, len(room)+4), recNotOwner), room)
}

func encForward(room, node string, req uint64, prefix, suffix []byte) []byte {
	b := make([]byte, 0, len(room)+len(node)+len(prefix)+len(suffix)+24)
	b = append(b, recForward)
	b = appendField(appendField(b, room), node)
	b = appendUint(b, req)
	return appendBytesField(appendBytesField(b, prefix), suffix)
}

func encSnapshot(room, epoch string, seq uint64, tail []Entry) []byte {
	n := len(room) + len(epoch) + 32
	for _, e := range tail {
		n += len(e.Payload) + 16
	}
	b := append(make([]byte, 0, n), recSnapshot)
	b = appendField(appendField(b, room), epoch)
	b = appendUint(appendUint(b, seq), uint64(len(tail)))
	for _, e := range tail {
		b = appendBytesField(appendUint(b, e.Seq), e.Payload)
	}
	return b
}

// encOwn is a recOwn: the room handed to its new owner with its other
// followers.
func encOwn(room string, seq uint64, nodes []string) []byte {
	b := append(make([]byte, 0, len(room)+32+24*len(nodes)), recOwn)
	b = appendUint(appendUint(appendField(b, room), seq), uint64(len(nodes)))
	for _, n := range nodes {
		b = appendField(b, n)
	}
	return b
}

// followReader cuts a payload's records.
type followReader struct {
	s   string
	err error
}

func (r *followReader) field() string {
	if r.err != nil {
		return ""
	}
	f, rest, ok := lenPrefixed(r.s)
	if !ok {
		r.err = errBadFollow
		return ""
	}
	r.s = rest
	return f
}

func (r *followReader) uint() uint64 {
	f := r.field()
	if r.err != nil {
		return 0
	}
	n, err := strconv.ParseUint(f, 10, 64)
	if err != nil {
		r.err = errBadFollow
	}
	return n
}

// splitFollow decodes a payload (after followMark) into its records,
// appending them to recs. The records' strings share the payload's memory;
// a snapshot's entries are copied.
func splitFollow(payload string, recs []followRec) ([]followRec, error) {
	r := followReader{s: payload}
	for r.s != "" && r.err == nil {
		k := r.s[0]
		r.s = r.s[1:]
		rec := followRec{kind: k}
		switch k {
		case recMessage:
			rec.room, rec.seq, rec.json = r.field(), r.uint(), r.field()
		case recAck:
			rec.req, rec.seq = r.uint(), r.uint()
		case recMark, recBusy:
			rec.req = r.uint()
		case recTime:
			rec.seq = r.uint()
		case recSnapshot:
			rec.room, rec.epoch, rec.seq = r.field(), r.field(), r.uint()
			n := r.uint()
			if n > uint64(len(r.s)) { // each entry takes at least a byte
				return recs, errBadFollow
			}
			for i := uint64(0); i < n && r.err == nil; i++ {
				seq, json := r.uint(), r.field()
				rec.tail = append(rec.tail, Entry{Seq: seq, Payload: []byte(json)})
			}
		case recFollow, recUnfollow, recDropped:
			rec.room, rec.node = r.field(), r.field()
		case recForward:
			rec.room, rec.node, rec.req = r.field(), r.field(), r.uint()
			rec.prefix, rec.suffix = r.field(), r.field()
		case recNotOwner:
			rec.room = r.field()
		case recOwn:
			rec.room, rec.seq = r.field(), r.uint()
			n := r.uint()
			if n > uint64(len(r.s)) {
				return recs, errBadFollow
			}
			for i := uint64(0); i < n && r.err == nil; i++ {
				rec.nodes = append(rec.nodes, r.field())
			}
		case recOwner:
			rec.room, rec.node = r.field(), r.field()
		default:
			return recs, errBadFollow
		}
		if r.err != nil {
			return recs, r.err
		}
		recs = append(recs, rec)
	}
	return recs, r.err
}
