package audit

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// delivery is one synthetic frame a client gets: "c<i> <json>".
type delivery struct {
	client int
	frame  string
}

func joined(c int, epoch string, seq uint64) delivery {
	return delivery{c, fmt.Sprintf(`{"type":"joined","room":"r","epoch":%q,"seq":%d}`, epoch, seq)}
}

func chat(c int, seq uint64, sender int, id uint64) delivery {
	return delivery{c, fmt.Sprintf(`{"room":"r","seq":%d,"sender":"a%d","message_id":%d,"text":"x"}`, seq, sender, id)}
}

func gap(c int, since, firstSeq uint64, reset bool) delivery {
	return delivery{c, fmt.Sprintf(`{"type":"history_gap","room":"r","since":%d,"first_seq":%d,"reset":%t}`, since, firstSeq, reset)}
}

// The checker on synthetic deliveries to three members of one room, who
// all joined before anyone sent: every message a client received is owed
// to each of them, whatever seq or node it came under.
func TestCheckCountsWhatWasSent(t *testing.T) {
	joinAll := []delivery{joined(0, "E1", 0), joined(1, "E1", 0), joined(2, "E1", 0)}
	for _, tt := range []struct {
		name   string
		sent   map[int][]uint64 // per sender: the message_ids it wrote
		got    []delivery
		want   string // Expected Delivered Flagged Missing SeqsTwo LostSends
		broken string // the guarantees broken, by their name before the colon
		twice  string // in the example of a seq naming two messages
	}{
		{"every member gets every message", map[int][]uint64{0: {1}, 1: {1}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(2, 1, 0, 1), chat(0, 2, 1, 1), chat(1, 2, 1, 1), chat(2, 2, 1, 1)},
			"6 6 0 0 0 0", "", ""},
		// Two nodes hand out seq 1 of the same epoch to two messages: each
		// member "has" seq 1, and misses the other message.
		{"a seq naming two messages", map[int][]uint64{0: {1}, 1: {1}},
			[]delivery{chat(0, 1, 0, 1), chat(2, 1, 0, 1), chat(1, 1, 1, 1)},
			"6 3 0 3 1 0", "no loss, order", "seq 1 of epoch E1 in room r was a0's message 1 and a1's message 1"},
		// Seq 1 and 2 carry the same message (ordered twice): each member
		// receiving both got it twice, though no seq came twice.
		{"a message ordered twice", map[int][]uint64{0: {1}},
			[]delivery{chat(0, 1, 0, 1), chat(0, 2, 0, 1), chat(1, 1, 0, 1), chat(1, 2, 0, 1), chat(2, 1, 0, 1)},
			"3 3 0 0 0 0 2", "no duplicates, order", ""},
		// The sender's echo says the server accepted it: the other two
		// members owe it though no one else received it.
		{"accepted, echoed to its sender only", map[int][]uint64{0: {1}},
			[]delivery{chat(0, 1, 0, 1)},
			"3 1 0 2 0 0", "no loss", ""},
		{"a send no one received is a lost send, owed to no one", map[int][]uint64{0: {1, 2}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(2, 1, 0, 1)},
			"3 3 0 0 0 1", "no loss", ""},
		// Member 2 resumes at seq 3 after a history_gap that says 1 and 2
		// are gone: told, not a silent loss.
		{"a member told by history_gap", map[int][]uint64{0: {1, 2, 3}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(0, 2, 0, 2), chat(1, 2, 0, 2), chat(0, 3, 0, 3), chat(1, 3, 0, 3),
				joined(2, "E1", 3), gap(2, 0, 3, false), chat(2, 3, 0, 3)},
			"9 7 2 0 0 0", "", ""},
		{"the same resume, never told", map[int][]uint64{0: {1, 2, 3}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(0, 2, 0, 2), chat(1, 2, 0, 2), chat(0, 3, 0, 3), chat(1, 3, 0, 3),
				joined(2, "E1", 3), chat(2, 3, 0, 3)},
			"9 7 0 2 0 0", "no loss", ""},
		// The room started anew (E2) while member 2 was away: the reset
		// tells it the rest of E1 is gone, and first_seq 2 that E2's seq 1
		// is gone too.
		{"a member told by a reset", map[int][]uint64{0: {1, 2}, 1: {1, 2}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(2, 1, 0, 1), chat(0, 2, 0, 2), chat(1, 2, 0, 2),
				joined(0, "E2", 0), joined(1, "E2", 0), chat(0, 1, 1, 1), chat(1, 1, 1, 1), chat(0, 2, 1, 2), chat(1, 2, 1, 2),
				joined(2, "E2", 2), gap(2, 1, 2, true), chat(2, 2, 1, 2)},
			"12 10 2 0 0 0", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newAuditor(Config{Rooms: 1, RoomSize: 3, Protocol: ProtocolScalechat})
			for i := range 3 {
				a.clients = append(a.clients, newClient(a, i, "r", 0))
			}
			prev := make([]uint64, 3)
			for _, d := range append(append([]delivery(nil), joinAll...), tt.got...) {
				if err := a.clients[d.client].frame([]byte(d.frame), &prev[d.client]); err != nil {
					t.Fatalf("%s: %v", d.frame, err)
				}
			}
			for c, ids := range tt.sent {
				for _, id := range ids {
					a.clients[c].sent[id] = time.Now()
				}
			}
			res := a.check()
			got := fmt.Sprintf("%d %d %d %d %d %d", res.Expected, res.Delivered, res.Flagged, res.Missing, res.SeqsTwoMessages, res.LostSends)
			if res.Duplicates > 0 {
				got += fmt.Sprintf(" %d", res.Duplicates)
			}
			if got != tt.want {
				t.Errorf("expected delivered flagged missing seqs-two lost [dups] = %s, want %s", got, tt.want)
			}
			var broken []string
			for _, g := range res.Guarantees {
				if !g.Held {
					name, _, _ := strings.Cut(g.Name, ":")
					broken = append(broken, name)
				}
			}
			if b := strings.Join(broken, ", "); b != tt.broken || res.Broken != (b != "") {
				t.Errorf("broken: %q (%v), want %q", b, res.Broken, tt.broken)
			}
			if !strings.Contains(res.SeqTwoExample, tt.twice) || (tt.twice == "") != (res.SeqTwoExample == "") {
				t.Errorf("example %q, want %q", res.SeqTwoExample, tt.twice)
			}
		})
	}
}
