package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

func openNATSHistory(t *testing.T, runs int64) *natsHistory {
	t.Helper()
	h, err := newNATSHistory(context.Background(), testJetStream(t, testsupport.StartNATS(t)), "scalechat_history", "scalechat", runs, 1)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// run is messages first…last of a room, each its seq as text.
func run(first, last uint64) []Entry {
	var es []Entry
	for s := first; s <= last; s++ {
		es = append(es, Entry{Seq: s, Payload: fmt.Appendf(nil, "m%d", s)})
	}
	return es
}

func seqsOf(es []Entry) []uint64 {
	var s []uint64
	for _, e := range es {
		if string(e.Payload) != fmt.Sprintf("m%d", e.Seq) {
			return append(s, 0) // a payload that is not its seq's
		}
		s = append(s, e.Seq)
	}
	return s
}

// Runs written one after the other read back as one history, the newest n
// of it, in seq order; a run that overlaps the one before (a fill) adds
// only what is new; a room's name may be any text.
func TestNATSHistoryReadsRunsAsOneHistory(t *testing.T) {
	h := openNATSHistory(t, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	room := "ü room/with.dots*>"
	var end uint64
	for _, r := range [][]Entry{run(1, 3), run(4, 4), run(3, 6), run(7, 8)} {
		var err error
		if end, err = h.write(ctx, room, "e1", r, end); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		n    int
		want []uint64
	}{{100, []uint64{1, 2, 3, 4, 5, 6, 7, 8}}, {3, []uint64{6, 7, 8}}} {
		epoch, msgs, got, err := h.read(ctx, room, c.n)
		if err != nil || epoch != "e1" || got != end || !slices.Equal(seqsOf(msgs), c.want) {
			t.Errorf("read(%d) = %q, %v, end %d, %v; want e1, %v, end %d", c.n, epoch, seqsOf(msgs), got, err, c.want, end)
		}
	}
	if epoch, msgs, end, err := h.read(ctx, "never written", 10); err != nil || epoch != "" || len(msgs) != 0 || end != 0 {
		t.Errorf("a room never written: %q, %v, %d, %v", epoch, msgs, end, err)
	}
}

// The fence: a write that does not follow the subject's end is refused, so
// that after a takeover's mark the old owner writes nothing more, and the
// history reads as the new epoch alone.
func TestNATSHistoryFencesAStaleOwner(t *testing.T) {
	h := openNATSHistory(t, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	end, err := h.write(ctx, "r", "e1", run(1, 2), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.write(ctx, "r", "e1", run(3, 3), 0); !errors.Is(err, errRoomMoved) {
		t.Fatalf("a write after a stale end: %v, want errRoomMoved", err)
	}
	markEnd, err := h.mark(ctx, "r", "e2") // a takeover
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.write(ctx, "r", "e1", run(3, 3), end); !errors.Is(err, errRoomMoved) {
		t.Fatalf("the old owner's write after the takeover: %v, want errRoomMoved", err)
	}
	epoch, msgs, got, err := h.read(ctx, "r", 10)
	if err != nil || epoch != "e2" || len(msgs) != 0 || got != markEnd {
		t.Fatalf("after the mark: %q, %v, end %d, %v; want e2, nothing, end %d", epoch, seqsOf(msgs), got, err, markEnd)
	}
	if _, err := h.write(ctx, "r", "e2", run(1, 2), markEnd); err != nil {
		t.Fatalf("the new owner's write: %v", err)
	}
	if epoch, msgs, _, err := h.read(ctx, "r", 10); err != nil || epoch != "e2" || !slices.Equal(seqsOf(msgs), []uint64{1, 2}) {
		t.Fatalf("the new epoch: %q, %v, %v; want e2, [1 2]", epoch, seqsOf(msgs), err)
	}
}

// A room's subject keeps its newest runs (MaxMsgsPerSubject): the oldest
// go, and the history reads from the first kept.
func TestNATSHistoryKeepsTheNewestRuns(t *testing.T) {
	h := openNATSHistory(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var end uint64
	for s := uint64(1); s <= 10; s += 2 {
		var err error
		if end, err = h.write(ctx, "r", "e1", run(s, s+1), end); err != nil {
			t.Fatal(err)
		}
	}
	if _, msgs, _, err := h.read(ctx, "r", 100); err != nil || !slices.Equal(seqsOf(msgs), []uint64{5, 6, 7, 8, 9, 10}) {
		t.Fatalf("read = %v, %v; want the last three runs, 5…10", seqsOf(msgs), err)
	}
}
