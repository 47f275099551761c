package broker

import (
	"reflect"
	"strings"
	"testing"
)

// TestFollowRecordsRoundTrip: every record the owner protocol sends
// decodes to what was encoded, one after the other in one payload, as a
// round joins them (sendPayload).
func TestFollowRecordsRoundTrip(t *testing.T) {
	tail := []Entry{{Seq: 4, Payload: []byte(`{"seq":4,"text":"a:b"}`)}, {Seq: 5, Payload: []byte(`{}`)}}
	cases := []struct {
		name string
		rec  []byte
		want followRec
	}{
		{"message", encMessage("r:1", 12, []byte(`{"seq":12}`)), followRec{kind: recMessage, room: "r:1", seq: 12, json: `{"seq":12}`}},
		{"ack", encAck(7, 99), followRec{kind: recAck, req: 7, seq: 99}},
		{"refusal", encAck(8, 0), followRec{kind: recAck, req: 8}},
		{"snapshot", encSnapshot("room", "ep", 5, tail), followRec{kind: recSnapshot, room: "room", epoch: "ep", seq: 5, tail: tail}},
		{"empty snapshot", encSnapshot("room", "ep", 0, nil), followRec{kind: recSnapshot, room: "room", epoch: "ep"}},
		{"follow", encRoomNode(recFollow, "room", "node1"), followRec{kind: recFollow, room: "room", node: "node1"}},
		{"unfollow", encRoomNode(recUnfollow, "room", "node1"), followRec{kind: recUnfollow, room: "room", node: "node1"}},
		{"forward", encForward("room", "n2", 3, []byte(`{"seq":`), []byte(`,"text":"12:3"}`)),
			followRec{kind: recForward, room: "room", node: "n2", req: 3, prefix: `{"seq":`, suffix: `,"text":"12:3"}`}},
		{"not owner", encNotOwner("room"), followRec{kind: recNotOwner, room: "room"}},
		{"own", encOwn("room", 41, []string{"a", "b"}), followRec{kind: recOwn, room: "room", seq: 41, nodes: []string{"a", "b"}}},
		{"owner", encRoomNode(recOwner, "room", "a"), followRec{kind: recOwner, room: "room", node: "a"}},
		{"dropped", encRoomNode(recDropped, "room", "a"), followRec{kind: recDropped, room: "room", node: "a"}},
		{"mark", encMark(12), followRec{kind: recMark, req: 12}},
	}
	var batch []job
	var want []followRec
	for _, c := range cases {
		got, err := splitFollow(string(c.rec), nil)
		if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], c.want) {
			t.Errorf("%s: got %+v, %v; want %+v", c.name, got, err, c.want)
		}
		batch = append(batch, job{kind: jobSend, rec: c.rec})
		want = append(want, c.want)
	}
	// A message as keep queues it: its record is made when sent.
	batch = append(batch, job{kind: jobSend, room: "r:2", e: Entry{Seq: 13, Payload: []byte(`{"seq":13}`)}})
	want = append(want, followRec{kind: recMessage, room: "r:2", seq: 13, json: `{"seq":13}`})
	js := make([]int, len(batch))
	for i := range js {
		js[i] = i
	}
	// The round's time first (redis_transit.go).
	want = append([]followRec{{kind: recTime, seq: 1_700_000_000_123_456_789}}, want...)
	payload := string(sendPayload(batch, js, 1_700_000_000_123_456_789))
	rest, ok := strings.CutPrefix(payload, string(followMark))
	if !ok {
		t.Fatalf("payload %q does not start with the mark", payload)
	}
	got, err := splitFollow(rest, nil)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("joined payload: got %+v, %v", got, err)
	}
}

// TestFollowRecordsRefuseBadInput: a payload that does not decode is an
// error, with the records before the bad one kept.
func TestFollowRecordsRefuseBadInput(t *testing.T) {
	good := string(encAck(1, 2))
	for _, bad := range []string{"X", "M", "M4:room", "M4:roomx:1", "A1:1", "L1:r1:e1:11:9", "L1:r1:e1:13:5", "P1:r", "O1:r1:19:3", "A99999999999999999999:1"} {
		got, err := splitFollow(good+bad, nil)
		if err == nil {
			t.Errorf("%q decoded: %+v", bad, got)
		}
		if len(got) != 1 || got[0].kind != recAck {
			t.Errorf("%q: the good record before it was lost: %+v", bad, got)
		}
	}
}

// FuzzSplitFollow: no input makes the decoder panic, and what it decodes
// from a payload of encoded records is what was encoded.
func FuzzSplitFollow(f *testing.F) {
	f.Add(string(encSnapshot("r", "e", 2, []Entry{{Seq: 2, Payload: []byte("x")}})), "room", uint64(3))
	f.Add("O1:r1:12:9", "", uint64(0))
	f.Fuzz(func(t *testing.T, raw, room string, seq uint64) {
		_, _ = splitFollow(raw, nil)
		rec := encMessage(room, seq, []byte(raw))
		got, err := splitFollow(string(rec), nil)
		if err != nil || len(got) != 1 || got[0].room != room || got[0].seq != seq || got[0].json != raw {
			t.Fatalf("message %q/%d/%q came back as %+v, %v", room, seq, raw, got, err)
		}
	})
}
