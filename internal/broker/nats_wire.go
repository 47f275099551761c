package broker

import (
	"encoding/binary"
	"errors"
)

// The records one node sends another on its node subject (nats_bus.go), a
// round's in one message, read in the order sent. Each is a kind byte and
// its fields, numbers as uvarints and bytes length-prefixed.
const (
	natsRecMsg      = 'M' // room, seq, payload: a message the owner ordered
	natsRecSnapshot = 'S' // room, epoch, seq, n, n × (seq, payload): what a new follower loads
	natsRecAck      = 'A' // id, seq: a forward ordered
	natsRecRefuse   = 'N' // id, code: a forward not ordered (natsRefuse*)
	natsRecRelease  = 'R' // room, epoch, seq: the owner let go of the room after seq; claim it
	natsRecNoFollow = 'X' // room: a follow the owner cannot serve now; ask again
	natsRecForward  = 'F' // room, id, prefix, suffix, received: a publish for the room's owner to order
)

// Why an owner did not order a forward.
const (
	natsRefuseMoved      = 1 // the room does not order here now: read its holder again
	natsRefuseOverloaded = 2 // past this node's capacity (ErrOverloaded)
)

// natsRecord is one record read back.
type natsRecord struct {
	kind    byte
	room    string
	epoch   string
	seq     uint64 // a message's, a snapshot's latest, a release's, an ack's
	id      uint64 // an ack's or refusal's forward
	code    uint64 // a refusal's
	payload []byte
	tail    []Entry // a snapshot's history
	// A forward's publication: its payload is the prefix.
	suffix   []byte
	received int64
}

var errNATSRecord = errors.New("a malformed record on the node subject")

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendMsgRec(b []byte, room string, e Entry) []byte {
	b = append(b, natsRecMsg)
	b = appendString(b, room)
	b = binary.AppendUvarint(b, e.Seq)
	return appendBytes(b, e.Payload)
}

func appendSnapshotRec(b []byte, room, epoch string, seq uint64, tail []Entry) []byte {
	b = append(b, natsRecSnapshot)
	b = appendString(b, room)
	b = appendString(b, epoch)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(tail)))
	for _, e := range tail {
		b = binary.AppendUvarint(b, e.Seq)
		b = appendBytes(b, e.Payload)
	}
	return b
}

func appendAnswerRec(b []byte, kind byte, id, n uint64) []byte {
	b = append(b, kind)
	b = binary.AppendUvarint(b, id)
	return binary.AppendUvarint(b, n)
}

func appendReleaseRec(b []byte, room, epoch string, seq uint64) []byte {
	b = append(b, natsRecRelease)
	b = appendString(b, room)
	b = appendString(b, epoch)
	return binary.AppendUvarint(b, seq)
}

func appendNoFollowRec(b []byte, room string) []byte {
	b = append(b, natsRecNoFollow)
	return appendString(b, room)
}

// natsReader reads fields off a payload; the first malformed one sets err.
type natsReader struct {
	b   []byte
	err error
}

func (r *natsReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errNATSRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *natsReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errNATSRecord
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

// readNATSRecords splits a round's payload into its records, calling fn
// with each; it stops at the first malformed one. The records' byte
// slices point into payload.
func readNATSRecords(payload []byte, fn func(natsRecord)) error {
	r := natsReader{b: payload}
	for len(r.b) > 0 && r.err == nil {
		rec := natsRecord{kind: r.b[0]}
		r.b = r.b[1:]
		switch rec.kind {
		case natsRecMsg:
			rec.room = string(r.bytes())
			rec.seq = r.uvarint()
			rec.payload = r.bytes()
		case natsRecSnapshot:
			rec.room, rec.epoch = string(r.bytes()), string(r.bytes())
			rec.seq = r.uvarint()
			n := r.uvarint()
			if n > uint64(len(r.b)) { // each entry takes two bytes at least
				return errNATSRecord
			}
			rec.tail = make([]Entry, 0, n)
			for range n {
				rec.tail = append(rec.tail, Entry{Seq: r.uvarint(), Payload: r.bytes()})
			}
		case natsRecAck:
			rec.id, rec.seq = r.uvarint(), r.uvarint()
		case natsRecRefuse:
			rec.id, rec.code = r.uvarint(), r.uvarint()
		case natsRecRelease:
			rec.room, rec.epoch = string(r.bytes()), string(r.bytes())
			rec.seq = r.uvarint()
		case natsRecNoFollow:
			rec.room = string(r.bytes())
		case natsRecForward:
			rec.room = string(r.bytes())
			rec.id = r.uvarint()
			rec.payload, rec.suffix = r.bytes(), r.bytes()
			rec.received = int64(r.uvarint())
		default:
			return errNATSRecord
		}
		if r.err != nil {
			return r.err
		}
		fn(rec)
	}
	return r.err
}

// appendForwardRec is a follower's publish for the room's owner, in the
// round to the owner's node: its id, for the answer, and its parts.
func appendForwardRec(b []byte, id uint64, p Publication) []byte {
	b = append(b, natsRecForward)
	b = appendString(b, p.Room)
	b = binary.AppendUvarint(b, id)
	b = appendBytes(b, p.Prefix)
	b = appendBytes(b, p.Suffix)
	return binary.AppendUvarint(b, uint64(p.Received))
}

// publication is a forward record's publication, delivered from the
// broker's goroutine.
func (rec natsRecord) publication() Publication {
	return Publication{Room: rec.room, Prefix: rec.payload, Suffix: rec.suffix, Received: rec.received, From: -1}
}
