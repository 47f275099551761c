package broker

import (
	"context"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// ownState keeps each room's publishes out at another node's order in the
// order they were sent; the first is the one orderHere may order. An
// answer of a ticket not out changes nothing (one given up already).
func TestOwnStateKeepsPublishesOutInOrder(t *testing.T) {
	s := newOwnState()
	var r1, r2, q1 uint64
	steps := []struct {
		do          func()
		rOut, qOut  bool // isOut of r and of q after the step
		first       *uint64
		outstanding int64
	}{
		{func() {}, false, false, nil, 0},
		{func() { r1 = s.sendOut("r") }, true, false, &r1, 1},
		{func() { r2 = s.sendOut("r") }, true, false, &r1, 2},
		{func() { q1 = s.sendOut("q") }, true, true, &r1, 3},
		{func() { s.answered("q", q1) }, true, false, &r1, 2},
		{func() { s.answered("q", q1) }, true, false, &r1, 2},
		{func() { s.answered("r", r1) }, true, false, &r2, 1},
		{func() { s.answered("r", r2) }, false, false, nil, 0},
	}
	for i, st := range steps {
		st.do()
		if s.isOut("r") != st.rOut || s.isOut("q") != st.qOut || s.outN.Load() != st.outstanding {
			t.Errorf("step %d: r out %v, q out %v, %d in all; want %v, %v, %d",
				i, s.isOut("r"), s.isOut("q"), s.outN.Load(), st.rOut, st.qOut, st.outstanding)
		}
		for _, tk := range []uint64{r1, r2} {
			if want := st.first != nil && *st.first == tk; tk != 0 && isFirst(&s, "r", tk) != want {
				t.Errorf("step %d: ticket %d first %v, want %v", i, tk, !want, want)
			}
		}
	}
}

// A publish of a room on its way to another node's order holds back the
// room's later publishes, though the room is owned here: they go out too
// (to the room's holder: this node, orderHere), and are ordered once it is
// answered, so that a sender's later message never overtakes it.
func TestOwnedRoomWaitsForAPublishOut(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a := startNode(t, rs.URL(), 100)
	ownRooms(t, a, "r")
	out := a.b.own.sendOut("r") // as Publish does when it sends one on
	held := make(chan uint64, 1)
	a.h.publishTo(a.b, textPub("r", "held"), held)
	// Nothing signals a publish not ordered: orderHere tries every
	// retryWait/4, so a few of its tries pass here.
	select {
	case seq := <-held:
		t.Fatalf("ordered (seq %d) while an earlier publish of the room was out", seq)
	case <-time.After(4 * retryWait):
	}
	a.b.own.answered("r", out)
	if seq := answerOf(t, held, "the held publish, once the one out was answered,"); seq != 2 {
		t.Fatalf("the held publish got seq %d, want 2", seq)
	}
	if seq, err := a.b.Publish(textPub("r", "next")); err != nil || seq != 3 {
		t.Fatalf("with nothing out, Publish gave seq %d (%v), want 3 at once", seq, err)
	}
}

// Publishes handed back to be ordered here go in the order they were sent,
// whichever comes back first: a later one waits for the earlier.
func TestOrderHereKeepsTheSendOrder(t *testing.T) {
	rs := testsupport.StartRedis(t)
	a := startNode(t, rs.URL(), 100)
	ownRooms(t, a, "r")
	first := forward{p: textPub("r", "first"), tries: 1, ticket: a.b.own.sendOut("r")}
	second := forward{p: textPub("r", "second"), tries: 1, ticket: a.b.own.sendOut("r")}
	ctx := context.Background()
	done := make(chan struct{})
	go func() { a.b.orderHere(ctx, second); close(done) }()
	time.Sleep(2 * retryWait) // the second tries, and waits behind the first
	a.b.orderHere(ctx, first)
	<-done
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	var got []string
	for _, e := range a.h.rooms["r"].msgs {
		got = append(got, string(e.Payload))
	}
	if len(got) != 3 || got[1] != "first#2" || got[2] != "second#3" {
		t.Fatalf("ordered %q, want first#2 then second#3 after the first message", got)
	}
	if a.b.own.isOut("r") {
		t.Error("a publish of r is still out once both were ordered")
	}
}

func isFirst(s *ownState, room string, ticket uint64) bool {
	first, _ := s.firstOut(room, ticket)
	return first
}

func textPub(room, text string) Publication {
	return Publication{Room: room, Prefix: []byte(text + "#")}
}
