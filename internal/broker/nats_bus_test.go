package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// natsBusNode is one node's bus on its own connection, and what it got:
// payloads, and the subjects the server answered no responders on.
type natsBusNode struct {
	bus     *natsBus
	got     chan []byte
	unheard chan string
	lost    chan struct{}
}

func startNATSBus(t *testing.T, url, id string, deliver func([]byte)) *natsBusNode {
	t.Helper()
	n := &natsBusNode{got: make(chan []byte, 1<<16), unheard: make(chan string, 16), lost: make(chan struct{}, 1)}
	if deliver == nil {
		deliver = func(p []byte) { n.got <- p }
	}
	nc, err := nats.Connect(url, nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		n.bus.slowConsumer(sub, err, func() {
			select {
			case n.lost <- struct{}{}:
			default:
			}
		})
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	n.bus, err = newNATSBus(nc, "scalechat", id, func(m *nats.Msg) {
		if m.Header.Get("Status") == "503" {
			n.unheard <- m.Subject
			return
		}
		deliver(m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// What a node sends another arrives whole and in the order sent, across
// many rounds, with or without a flush between them.
func TestNATSBusKeepsASendersOrder(t *testing.T) {
	url := testsupport.StartNATS(t)
	a := startNATSBus(t, url, "a", nil)
	b := startNATSBus(t, url, "b", nil)
	const n = 20000
	for i := range n {
		if err := a.bus.send("b", []byte(strconv.Itoa(i)), ""); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			if err := a.bus.flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.bus.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for i := range n {
		select {
		case p := <-b.got:
			if string(p) != strconv.Itoa(i) {
				t.Fatalf("payload %d is %q: out of order", i, p)
			}
		case <-timeout:
			t.Fatalf("got %d of %d payloads within 30s", i, n)
		}
	}
}

// A round sent to a node nobody listens for (gone, or never there) is
// answered by the server, on the reply subject under the sender's own,
// with no responders: how a node learns at once that another is gone
// (NATS.nodeUnheard). A round to a node that listens is delivered and
// answered by nobody. A fact of nats-server, pinned against the real one.
func TestNATSBusRoundToANodeGoneIsAnswered(t *testing.T) {
	url := testsupport.StartNATS(t)
	a := startNATSBus(t, url, "a", nil)
	b := startNATSBus(t, url, "b", nil)
	send := func(node string) {
		t.Helper()
		if err := a.bus.send(node, []byte("round"), a.bus.replySubject("a", "r", node)); err != nil {
			t.Fatal(err)
		}
		if err := a.bus.flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	unheard := func() string {
		t.Helper()
		select {
		case s := <-a.unheard:
			return s
		case <-time.After(5 * time.Second):
			t.Fatal("no answer from the server within 5s")
			return ""
		}
	}
	// The server answers in order: had the round to b been answered, its
	// answer would come before the one for the node that is gone.
	send("b")
	send("gone")
	if got := unheard(); got != "scalechat.node.a.r.gone" {
		t.Errorf("first no responders on %q, want the round to the node that is gone", got)
	}
	if p := <-b.got; string(p) != "round" {
		t.Errorf("b got %q", p)
	}
	if err := b.bus.close(); err != nil {
		t.Fatal(err)
	}
	send("b")
	if got := unheard(); got != "scalechat.node.a.r.b" {
		t.Errorf("after b left: no responders on %q, want on b's round", got)
	}
}

// A node that cannot take its payloads in time loses some (the server's
// slow consumer), and is told: never a quiet gap.
func TestNATSBusTellsOfPayloadsDropped(t *testing.T) {
	url := testsupport.StartNATS(t)
	a := startNATSBus(t, url, "a", nil)
	release := make(chan struct{})
	b := startNATSBus(t, url, "b", func([]byte) { <-release })
	if err := b.bus.sub.SetPendingLimits(8, -1); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := a.bus.send("b", []byte(strconv.Itoa(i)), ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.bus.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.lost:
	case <-time.After(10 * time.Second):
		t.Fatal("no loss told within 10s of 100 payloads to a node that takes 8")
	}
	close(release)
	if b.bus.dropped.Load() == 0 {
		t.Error("the loss was not counted")
	}
}

// BenchmarkNATSBusRound is a node's side of one round on the bus: a
// payload of 20 records (rooms of 4 split 2+2 at 1 msg/s a client, rounds
// of 5 ms) sent and flushed, against an in-process server, the other
// node reading it. What it allocates a round is the client's.
func BenchmarkNATSBusRound(b *testing.B) {
	url := testsupport.StartNATS(b)
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	other, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(other.Close)
	got := make(chan struct{}, 1)
	if _, err := newNATSBus(other, "scalechat", "b", func(*nats.Msg) { got <- struct{}{} }); err != nil {
		b.Fatal(err)
	}
	bus, err := newNATSBus(nc, "scalechat", "a", func(*nats.Msg) {})
	if err != nil {
		b.Fatal(err)
	}
	payload := costPayload(20)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := bus.send("b", payload, ""); err != nil {
			b.Fatal(err)
		}
		if err := bus.flush(ctx); err != nil {
			b.Fatal(err)
		}
		<-got
	}
}
