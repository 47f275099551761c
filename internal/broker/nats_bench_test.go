package broker

import (
	"fmt"
	"testing"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// BenchmarkNATSOwnerForward is a follower's publish ordered by the room's
// owner on another node and back, through a real (in-process) nats-server:
// the forward, the owner's order and round, the follower's delivery and
// the answer. Publishes go one after another without waiting, 16 rooms.
func BenchmarkNATSOwnerForward(b *testing.B) {
	url := testsupport.StartNATS(b)
	owner := startNATSNode(b, url, NATSConfig{})
	follower := startNATSNode(b, url, NATSConfig{})
	rooms := make([]string, 16)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("r%d", i)
		owner.join(b, rooms[i])
		follower.join(b, rooms[i])
	}
	ch := make(chan uint64, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		follower.f.publishTo(follower.b, Publication{Room: rooms[i%len(rooms)], Prefix: []byte("m#")}, ch)
	}
	for range b.N {
		if answerOf(b, ch, "a forward") == 0 {
			b.Fatal("a forward was refused")
		}
	}
	for i, r := range rooms {
		follower.waitSeq(b, r, uint64((b.N-i+len(rooms)-1)/len(rooms)))
	}
}

// BenchmarkNATSRoundRecords is a message as keep queues it for a follower,
// framed into a round's payload, and read back on the other side.
func BenchmarkNATSRoundRecords(b *testing.B) {
	json := []byte(`{"type":"message","room":"room-1234","seq":12345,"sender":"alice","text":"` + string(make([]byte, 200)) + `"}`)
	var buf []byte
	b.ReportAllocs()
	for i := range b.N {
		buf = appendMsgRec(appendString(buf[:0], "node1"), "room-1234", Entry{Seq: uint64(i), Payload: json})
		r := natsReader{b: buf}
		_ = r.bytes()
		n := 0
		if err := readNATSRecords(r.b, func(natsRecord) { n++ }); err != nil || n != 1 {
			b.Fatal(err)
		}
	}
}
