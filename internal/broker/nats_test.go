package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// natsNode is a NATS broker with its fake rooms, running until the test ends
// or stop.
type natsNode struct {
	b    *NATS
	f    *fakeRooms
	stop context.CancelFunc
	done chan error
	once sync.Once
}

func startNATSNode(t testing.TB, url string, cfg NATSConfig) *natsNode {
	t.Helper()
	f := newFakeRooms()
	cfg.URL = url
	if cfg.History == 0 {
		cfg.History = 100
	}
	b, err := NewNATS(cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	f.unsubscribe = b.Unsubscribe
	ctx, cancel := context.WithCancel(context.Background())
	n := &natsNode{b: b, f: f, stop: cancel, done: make(chan error, 1)}
	go func() { n.done <- b.Run(ctx) }()
	t.Cleanup(n.close)
	return n
}

// close stops the node as a node stops (it hands its rooms on) and waits
// for it; once.
func (n *natsNode) close() {
	n.once.Do(func() {
		n.stop()
		<-n.done
	})
}

func (n *natsNode) join(t testing.TB, room string) {
	t.Helper()
	n.f.open(room)
	n.b.Subscribe(room)
	n.f.waitFor(t, 10*time.Second, "room "+room+" loaded", func() bool {
		r := n.f.rooms[room]
		return r != nil && r.loaded
	})
}

// publish publishes payload into room and returns the seq it got, failing
// the test when it got none.
func (n *natsNode) publish(t *testing.T, room, payload string) uint64 {
	t.Helper()
	ch := make(chan uint64, 1)
	n.f.publishTo(n.b, Publication{Room: room, Prefix: []byte(payload + "#")}, ch)
	seq := answerOf(t, ch, "publish "+payload)
	if seq == 0 {
		t.Fatalf("publish %s was refused", payload)
	}
	return seq
}

// waitSeq waits until room's seq on n reached seq.
func (n *natsNode) waitSeq(t testing.TB, room string, seq uint64) {
	t.Helper()
	n.f.waitFor(t, 10*time.Second, fmt.Sprintf("room %s at seq %d", room, seq), func() bool {
		r := n.f.rooms[room]
		return r != nil && r.seq >= seq
	})
}

func TestNATSBrokerOrdersARoomSharedByTwoNodes(t *testing.T) {
	url := testsupport.StartNATS(t)
	a := startNATSNode(t, url, NATSConfig{})
	b := startNATSNode(t, url, NATSConfig{})
	a.join(t, "r")
	b.join(t, "r")
	const n = 50
	for i := range n {
		node := a
		if i%2 == 1 {
			node = b
		}
		node.publish(t, "r", fmt.Sprintf("m%d", i))
	}
	a.waitSeq(t, "r", n)
	b.waitSeq(t, "r", n)
	pa, pb := a.f.payloads("r"), b.f.payloads("r")
	if !slices.Equal(pa, pb) || len(pa) != n {
		t.Fatalf("the two nodes hold different streams:\n%q\n%q", pa, pb)
	}
	for i, p := range pa {
		if want := fmt.Sprintf("%d:m%d#%d", i+1, i, i+1); p != want {
			t.Fatalf("message %d is %q, want %q", i, p, want)
		}
	}
	if st := a.b.Stats(); st.Owned != 1 || st.OwnedPublished != n {
		t.Errorf("the owner's stats: owned %d, ordered %d; want 1, %d", st.Owned, st.OwnedPublished, n)
	}
	if st := b.b.Stats(); st.Published != n/2 || st.Received != n {
		t.Errorf("the follower's stats: forwarded %d, received %d; want %d, %d", st.Published, st.Received, n/2, n)
	}
}

func TestNATSBrokerLoadsARoomFromItsHistory(t *testing.T) {
	url := testsupport.StartNATS(t)
	a := startNATSNode(t, url, NATSConfig{HistoryLinger: time.Millisecond})
	a.join(t, "r")
	for i := range 5 {
		a.publish(t, "r", fmt.Sprintf("m%d", i))
	}
	epoch := a.f.Epoch("r")
	a.b.Unsubscribe("r") // the last member left: written, released
	b := startNATSNode(t, url, NATSConfig{})
	b.f.open("r")
	// A's release may still be on its way: b loads whatever the record
	// says, which is the released room once A wrote it.
	b.b.Subscribe("r")
	b.f.waitFor(t, 10*time.Second, "room loaded with its history", func() bool {
		r := b.f.rooms["r"]
		return r != nil && r.loaded
	})
	if got := b.f.Epoch("r"); got != epoch {
		t.Fatalf("epoch %q after the release, want %q", got, epoch)
	}
	if seq, _ := b.f.Seq("r"); seq != 5 {
		t.Fatalf("loaded at seq %d, want 5", seq)
	}
	if seq := b.publish(t, "r", "next"); seq != 6 {
		t.Fatalf("the next message got seq %d, want 6", seq)
	}
}

func TestNATSBrokerHandsARoomToItsFollowerWhenTheOwnerLeaves(t *testing.T) {
	url := testsupport.StartNATS(t)
	a := startNATSNode(t, url, NATSConfig{})
	b := startNATSNode(t, url, NATSConfig{})
	a.join(t, "r")
	b.join(t, "r")
	for i := range 3 {
		b.publish(t, "r", fmt.Sprintf("m%d", i))
	}
	a.f.drop("r", nil)
	a.b.Unsubscribe("r")
	deadline := time.Now().Add(10 * time.Second)
	for !b.b.st.owned("r") {
		if time.Now().After(deadline) {
			t.Fatal("the follower did not take the released room on")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if seq := b.publish(t, "r", "after"); seq != 4 {
		t.Fatalf("the first message after the handover got seq %d, want 4", seq)
	}
	if got := b.b.Stats().Takeovers; got != 0 {
		t.Errorf("%d takeovers for a handover", got)
	}
}

func TestNATSBrokerTakesARoomOverFromADeadOwner(t *testing.T) {
	url := testsupport.StartNATS(t)
	cfg := NATSConfig{Lease: 2 * time.Second}
	a := startNATSNode(t, url, cfg)
	b := startNATSNode(t, url, cfg)
	a.join(t, "r")
	b.join(t, "r")
	b.publish(t, "r", "m0")
	epoch := b.f.Epoch("r")
	a.b.nc.Close() // dies: no release, its lease ends unrenewed
	// A publish at b finds the owner gone; once a's lease ended the room is
	// taken over and b's room dropped (its members resume into a new epoch).
	deadline := time.Now().Add(15 * time.Second)
	for b.f.Epoch("r") == epoch {
		if time.Now().After(deadline) {
			t.Fatalf("the room was not taken over: calls %q", b.f.calls)
		}
		ch := make(chan uint64, 1)
		b.f.publishTo(b.b, Publication{Room: "r", Prefix: []byte("try#")}, ch)
		if seq := answerOf(t, ch, "a publish to a dead owner's room"); seq != 0 {
			t.Fatalf("a publish to a dead owner's room got seq %d", seq)
		}
		if _, loaded := b.f.Seq("r"); !loaded { // dropped: its members rejoin
			b.join(t, "r")
		}
	}
	if got := b.b.Stats().Takeovers; got != 1 {
		t.Errorf("%d takeovers, want 1", got)
	}
	if seq := b.publish(t, "r", "new"); seq != 1 {
		t.Fatalf("the first message of the new epoch got seq %d, want 1", seq)
	}
}

// TestNATSBrokerRefusesPastItsBound: while the records for other nodes
// waited past MaxWait, a room shared with another node refuses (at its
// owner and at its follower, whose forward the owner refuses), and a room
// held alone goes on; past maxPendingWrites history writes, every room
// refuses.
func TestNATSBrokerRefusesPastItsBound(t *testing.T) {
	url := testsupport.StartNATS(t)
	cfg := NATSConfig{MaxWait: time.Second}
	a := startNATSNode(t, url, cfg)
	b := startNATSNode(t, url, cfg)
	a.join(t, "shared")
	b.join(t, "shared")
	a.join(t, "alone")
	b.publish(t, "shared", "before") // b follows: a knows it
	a.b.out.oldest.Store(time.Now().Add(-time.Minute).UnixNano())
	if _, err := a.b.Publish(Publication{Room: "shared", Prefix: []byte("x#")}); err != ErrOverloaded {
		t.Errorf("the owner's publish into a followed room: %v, want ErrOverloaded", err)
	}
	if seq, err := a.b.Publish(Publication{Room: "alone", Prefix: []byte("x#")}); err != nil || seq == 0 {
		t.Errorf("the owner's publish into a room of its own: %d %v, want ordered", seq, err)
	}
	ch := make(chan uint64, 1)
	b.f.publishTo(b.b, Publication{Room: "shared", Prefix: []byte("fw#")}, ch)
	if seq := answerOf(t, ch, "a forward to an owner past its bound"); seq != 0 {
		t.Errorf("a forward to an owner past its bound got seq %d", seq)
	}
	a.b.out.oldest.Store(0)
	a.b.out.writes.Add(maxPendingWrites + 1)
	if _, err := a.b.Publish(Publication{Room: "alone", Prefix: []byte("x#")}); err != ErrOverloaded {
		t.Errorf("a publish with the history behind: %v, want ErrOverloaded", err)
	}
	a.b.out.writes.Add(-(maxPendingWrites + 1))
	if st := a.b.Stats(); st.Overloaded < 3 {
		t.Errorf("%d refusals counted, want 3", st.Overloaded)
	}
}

// TestNATSBrokerTakesOverAnIdleRoomOfADeadOwner: nobody sends into the room
// after its owner died, and still, once the owner's lease ended, the room
// is taken over and dropped at its follower (whose members must be told
// that its stream ended: they resume into the new one).
func TestNATSBrokerTakesOverAnIdleRoomOfADeadOwner(t *testing.T) {
	url := testsupport.StartNATS(t)
	cfg := NATSConfig{Lease: 2 * time.Second}
	a := startNATSNode(t, url, cfg)
	b := startNATSNode(t, url, cfg)
	a.join(t, "idle")
	b.join(t, "idle")
	a.b.nc.Close()
	b.f.waitFor(t, 10*time.Second, "the idle room dropped at the follower", func() bool {
		r := b.f.rooms["idle"]
		return r == nil
	})
	if got := b.b.Stats().Takeovers; got != 1 {
		t.Errorf("%d takeovers, want 1", got)
	}
}

// TestNATSBrokerStoppingOwnerOrdersNoForwardAfterItsRelease: a stopping
// node releases its rooms (its followers are told to claim them, and no
// longer get its records); a forward that comes after must be refused, not
// ordered: ordered, its sender would be answered and the message sent to
// nobody (the audit's lost send under a SIGTERM).
func TestNATSBrokerStoppingOwnerOrdersNoForwardAfterItsRelease(t *testing.T) {
	url := testsupport.StartNATS(t)
	a := startNATSNode(t, url, NATSConfig{})
	b := startNATSNode(t, url, NATSConfig{})
	a.join(t, "r")
	b.join(t, "r")
	b.publish(t, "r", "before")
	a.b.releaseAll(context.Background())
	a.b.orderForward(b.b.id, 1, Publication{Room: "r", Prefix: []byte("late#"), From: -1})
	if got := a.f.payloads("r"); len(got) != 1 {
		t.Fatalf("the released owner ordered a forward that came after its release: %q", got)
	}
}
