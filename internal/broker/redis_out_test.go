package broker

import (
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// ownState counts each room's publishes out at another node's order; an
// answer of a room with none out changes nothing (a publish refused before
// it went out was never counted).
func TestOwnStateCountsPublishesOut(t *testing.T) {
	s := newOwnState()
	steps := []struct {
		do          func()
		r, q        bool // isOut of r and of q after the step
		outstanding int64
	}{
		{func() {}, false, false, 0},
		{func() { s.sendOut("r") }, true, false, 1},
		{func() { s.sendOut("r") }, true, false, 2},
		{func() { s.sendOut("q") }, true, true, 3},
		{func() { s.answered("r") }, true, true, 2},
		{func() { s.answered("q") }, true, false, 1},
		{func() { s.answered("q") }, true, false, 1},
		{func() { s.answered("r") }, false, false, 0},
	}
	for i, st := range steps {
		st.do()
		if s.isOut("r") != st.r || s.isOut("q") != st.q || s.outN.Load() != st.outstanding {
			t.Errorf("step %d: r out %v, q out %v, %d in all; want %v, %v, %d",
				i, s.isOut("r"), s.isOut("q"), s.outN.Load(), st.r, st.q, st.outstanding)
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
	a.b.own.sendOut("r") // as Publish does when it sends one on
	pub := func(text string) Publication {
		return Publication{Room: "r", Prefix: []byte(`{"text":"` + text + `","seq":`), Suffix: []byte(`}`)}
	}
	held := make(chan uint64, 1)
	a.h.publishTo(a.b, pub("held"), held)
	// Nothing signals a publish not ordered: orderHere tries every
	// retryWait/4, so a few of its tries pass here.
	select {
	case seq := <-held:
		t.Fatalf("ordered (seq %d) while an earlier publish of the room was out", seq)
	case <-time.After(4 * retryWait):
	}
	a.b.own.answered("r")
	select {
	case seq := <-held:
		if seq != 2 {
			t.Fatalf("the held publish got seq %d, want 2", seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held publish was not ordered once the one out was answered")
	}
	if seq, err := a.b.Publish(pub("next")); err != nil || seq != 3 {
		t.Fatalf("with nothing out, Publish gave seq %d (%v), want 3 at once", seq, err)
	}
}
