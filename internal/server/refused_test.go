//go:build linux

package server

import (
	"testing"

	"github.com/scalechat/scalechat/internal/broker"
)

// TestRefusalReachesItsSenderAlone: a publish's ID (refused.go) names the
// connection that sent it. A refusal reaches that connection, and not a
// later one on the same descriptor or an ID naming no connection; an
// answer with a seq tells no connection (the message reaches it as every
// member's); an HTTP waiter's ID goes to its waiter.
func TestRefusalReachesItsSenderAlone(t *testing.T) {
	rig := newLoopRig(t, 2)
	c := rig.conns[1]
	id := c.publishID()
	draft := append(append(append([]byte(nil), rig.draft[:rig.seqAt]...), '0'), rig.draft[rig.seqAt:]...)
	refusals := func() uint64 { return rig.l.stats.dropped[DropUnavailable].Load() }
	for _, tc := range []struct {
		name string
		id   uint64
		told bool
	}{
		{"a later connection on its descriptor", id ^ 1, false},
		{"a descriptor with no connection", uint64(len(rig.l.conns)-1)<<idFDAt | c.id&idLowMask, false},
		{"a descriptor past the loop's", uint64(len(rig.l.conns)+5)<<idFDAt | c.id&idLowMask, false},
		{"its sender", id, true}, // last: told, a five-field client is closed
	} {
		before := refusals()
		rig.l.refused(tc.id, draft, refusedMessage)
		if told := refusals() > before; told != tc.told {
			t.Errorf("%s: told %v, want %v", tc.name, told, tc.told)
		}
	}

	// settled routes by the ID: a refusal to the sender's loop, as a
	// command; a seq to nobody; a waiter's answer to its waiter.
	cmds := func() int {
		rig.l.cmdMu.Lock()
		defer rig.l.cmdMu.Unlock()
		return len(rig.l.cmds)
	}
	before := cmds()
	rig.srv.settled(broker.Publication{Room: "lobby", ID: id}, 9, nil)
	if n := cmds(); n != before {
		t.Errorf("an ordered publish queued %d commands, want none", n-before)
	}
	// Given up (the outcome unknown) or refused by the owner past its
	// capacity (nothing ordered): the sender is told which.
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{broker.ErrUnavailable, refusedMessage},
		{broker.ErrOverloaded, broker.ErrOverloaded.Error()},
	} {
		rig.srv.settled(broker.Publication{Room: "lobby", Prefix: rig.draft[:rig.seqAt], Suffix: rig.draft[rig.seqAt:], ID: id}, 0, tc.err)
		rig.l.cmdMu.Lock()
		last := rig.l.cmds[len(rig.l.cmds)-1]
		rig.l.cmdMu.Unlock()
		if last.kind != cmdRefused || last.id != id || string(last.pending) != string(draft) || last.reason != tc.reason {
			t.Errorf("the refusal (%v) queued %+v, want cmdRefused for %#x with the message and %q", tc.err, last, id, tc.reason)
		}
	}
	wid, got := rig.srv.waiters.add()
	rig.srv.settled(broker.Publication{Room: "lobby", ID: wid}, 7, nil)
	select {
	case a := <-got:
		if a.seq != 7 || a.err != nil {
			t.Errorf("the waiter got %+v, want seq 7", a)
		}
	default:
		t.Error("the waiter got no answer")
	}
	rig.srv.settled(broker.Publication{Room: "lobby", ID: wid}, 8, nil) // answered already: nobody waits
}
