package audit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/results"
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
		// eg: in the examples of a message under two seqs, of a seq
		// naming two messages, of a duplicate, in res and in the summary
		eg [3]string
	}{
		{"every member gets every message", map[int][]uint64{0: {1}, 1: {1}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(2, 1, 0, 1), chat(0, 2, 1, 1), chat(1, 2, 1, 1), chat(2, 2, 1, 1)},
			"6 6 0 0 0 0", "", [3]string{}},
		// Two nodes hand out seq 1 of the same epoch to two messages: each
		// member "has" seq 1, and misses the other message.
		{"a seq naming two messages", map[int][]uint64{0: {1}, 1: {1}},
			[]delivery{chat(0, 1, 0, 1), chat(2, 1, 0, 1), chat(1, 1, 1, 1)},
			"6 3 0 3 1 0", "no loss, order", [3]string{"", "seq 1 of epoch E1 in room r was a0's message 1 (received by a0) and a1's message 1 (received by a1 at ", ""}},
		// Seq 1 and 2 carry the same message (ordered twice): each member
		// receiving both got it twice, though no seq came twice.
		{"a message ordered twice", map[int][]uint64{0: {1}},
			[]delivery{chat(0, 1, 0, 1), chat(0, 2, 0, 1), chat(1, 1, 0, 1), chat(1, 2, 0, 1), chat(2, 1, 0, 1)},
			"3 3 0 0 0 0 2", "no duplicates, order", [3]string{
				"a0's message 1 was seq 1 of epoch E1 in room r (received by a0) and seq 2 of epoch E1 in room r (received by a0 at ", "",
				"a0 received a0's message 1 twice, at seq 1 of epoch E1 in room r and at seq 2 of epoch E1 in room r (again at "}},
		// Member 2 gets seq 2 twice (a resume that overlaps): one
		// duplicate, of a1's message, not a0's.
		{"a seq received twice", map[int][]uint64{0: {1}, 1: {1}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(2, 1, 0, 1), chat(0, 2, 1, 1), chat(1, 2, 1, 1), chat(2, 2, 1, 1), chat(2, 2, 1, 1)},
			"6 6 0 0 0 0 1", "no duplicates", [3]string{"", "", "a2 received a1's message 1 twice, at seq 2 of epoch E1 in room r (again at "}},
		// The sender's echo says the server accepted it: the other two
		// members owe it though no one else received it.
		{"accepted, echoed to its sender only", map[int][]uint64{0: {1}},
			[]delivery{chat(0, 1, 0, 1)},
			"3 1 0 2 0 0", "no loss", [3]string{}},
		{"a send no one received is a lost send, owed to no one", map[int][]uint64{0: {1, 2}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(2, 1, 0, 1)},
			"3 3 0 0 0 1", "no loss", [3]string{}},
		// Member 2 resumes at seq 3 after a history_gap that says 1 and 2
		// are gone: told, not a silent loss.
		{"a member told by history_gap", map[int][]uint64{0: {1, 2, 3}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(0, 2, 0, 2), chat(1, 2, 0, 2), chat(0, 3, 0, 3), chat(1, 3, 0, 3),
				joined(2, "E1", 3), gap(2, 0, 3, false), chat(2, 3, 0, 3)},
			"9 7 2 0 0 0", "", [3]string{}},
		{"the same resume, never told", map[int][]uint64{0: {1, 2, 3}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(0, 2, 0, 2), chat(1, 2, 0, 2), chat(0, 3, 0, 3), chat(1, 3, 0, 3),
				joined(2, "E1", 3), chat(2, 3, 0, 3)},
			"9 7 0 2 0 0", "no loss", [3]string{}},
		// The room started anew (E2) while member 2 was away: the reset
		// tells it the rest of E1 is gone, and first_seq 2 that E2's seq 1
		// is gone too.
		{"a member told by a reset", map[int][]uint64{0: {1, 2}, 1: {1, 2}},
			[]delivery{chat(0, 1, 0, 1), chat(1, 1, 0, 1), chat(2, 1, 0, 1), chat(0, 2, 0, 2), chat(1, 2, 0, 2),
				joined(0, "E2", 0), joined(1, "E2", 0), chat(0, 1, 1, 1), chat(1, 1, 1, 1), chat(0, 2, 1, 2), chat(1, 2, 1, 2),
				joined(2, "E2", 2), gap(2, 1, 2, true), chat(2, 2, 1, 2)},
			"12 10 2 0 0 0", "", [3]string{}},
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
			checkExamples(t, res, tt.eg)
		})
	}
}

// checkExamples checks the examples of a message under two seqs, of a
// seq naming two messages and of a duplicate against want, in res, in
// audit.json and in the summary.
func checkExamples(t *testing.T, res *results.Audit, want [3]string) {
	t.Helper()
	var summary strings.Builder
	if err := WriteSummary(&summary, res); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for i, eg := range []struct{ key, got string }{
		{"conflict_example", res.ConflictExample}, {"seq_two_example", res.SeqTwoExample}, {"duplicate_example", res.DuplicateExample},
	} {
		if !strings.Contains(eg.got, want[i]) || (want[i] == "") != (eg.got == "") {
			t.Errorf("%s %q, want %q", eg.key, eg.got, want[i])
		}
		if inJSON := strings.Contains(string(js), `"`+eg.key+`":`); inJSON != (eg.got != "") {
			t.Errorf("%s in audit.json: %v, want %v", eg.key, inJSON, eg.got != "")
		}
		if eg.got != "" && !strings.Contains(summary.String(), eg.got) {
			t.Errorf("the summary lacks %s %q:\n%s", eg.key, eg.got, summary.String())
		}
	}
}

// A five-field server (no seq) sends member 1 a0's message 2 twice: the
// duplicate's example names it, in room r.
func TestLegacyDuplicateExample(t *testing.T) {
	a := newAuditor(Config{Rooms: 1, RoomSize: 2, Protocol: ProtocolLegacy})
	for i := range 2 {
		c := newClient(a, i, "r", 0)
		a.clients = append(a.clients, c)
		c.mu.Lock()
		c.legacyJoined()
		c.mu.Unlock()
	}
	for _, d := range []delivery{{0, `{"sender":"a0","message_id":1}`}, {1, `{"sender":"a0","message_id":1}`},
		{0, `{"sender":"a0","message_id":2}`}, {1, `{"sender":"a0","message_id":2}`}, {1, `{"sender":"a0","message_id":2}`}} {
		if err := a.clients[d.client].legacyFrame([]byte(d.frame), nil); err != nil {
			t.Fatalf("%s: %v", d.frame, err)
		}
	}
	a.clients[0].sent[1], a.clients[0].sent[2] = time.Now(), time.Now()
	res := a.check()
	if res.Duplicates != 1 {
		t.Errorf("%d duplicates, want 1", res.Duplicates)
	}
	checkExamples(t, res, [3]string{"", "", "a1 received a0's message 2 twice in room r (again at "})
}
