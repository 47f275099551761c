package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// testNATSLease is the tests' lease: a dead node's counts leave, and a
// dead dispatcher's successor takes over, within about 1.5 s.
const testNATSLease = time.Second

// natsNode is a cluster node's webhooks on NATS in the test's process:
// its tracker and its dispatcher, each running until stop.
type natsNode struct {
	w    *NATS
	d    *Dispatcher
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func newTestNATS(t *testing.T, cfg NATSConfig) *NATS {
	t.Helper()
	if cfg.NATS.Lease == 0 {
		cfg.NATS.Lease = testNATSLease
	}
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	w, err := NewNATS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.nc.Close)
	return w
}

func startNATSNode(t *testing.T, url, receiver string, cfg NATSConfig) *natsNode {
	t.Helper()
	cfg.NATS.URL = url
	w := newTestNATS(t, cfg)
	n := &natsNode{w: w, d: NewDispatcher(w, DispatcherConfig{URL: receiver, Secret: []byte("k"), Batch: 2,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})}
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	n.wg.Go(func() { w.Run(ctx) })
	n.wg.Go(func() { n.d.Run(ctx) })
	t.Cleanup(n.shutdown)
	return n
}

// shutdown stops the node as SIGTERM would: its leave and its leases' end
// reach NATS.
func (n *natsNode) shutdown() {
	n.stop()
	n.wg.Wait()
}

// crash stops the node as a SIGKILL would: nothing it would tell NATS on
// its way out reaches it (its connection is closed first).
func (n *natsNode) crash() {
	n.w.nc.Close()
	n.shutdown()
}

func (n *natsNode) leader() bool {
	_, ok := n.w.leading()
	return ok
}

// TestNATSWebhooksAcrossNodes runs two nodes' webhooks on a real
// nats-server (in-process, JetStream) and a real HTTP receiver: users come
// and go on both nodes, and the dispatching node is killed (its leases
// then end). After deduplication by ID the receiver never sees a
// transition twice in a row, and it ends believing what is true.
func TestNATSWebhooksAcrossNodes(t *testing.T) {
	url := testsupport.StartNATS(t)
	rcv := NewReceiver([]byte("k"))
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	b := startNATSNode(t, url, srv.URL, NATSConfig{})
	waitFor(t, "b to dispatch", b.leader)
	a := startNATSNode(t, url, srv.URL, NATSConfig{})

	a.w.Presence("r1", "ann", 1)
	b.w.Presence("r1", "bob", 1)
	b.w.Presence("r1", "ann", 1)
	b.w.Presence("r2", "", 1)
	waitView(t, rcv, View{Rooms: []string{"r1", "r2"}, Users: []string{"ann", "bob"},
		Members: map[string][]string{"r1": {"ann", "bob"}}}, 10*time.Second)

	a.w.Presence("r1", "ann", 0) // ann is still in r1 on b: no event
	a.w.Presence("r3", "cat", 1)
	waitView(t, rcv, View{Rooms: []string{"r1", "r2", "r3"}, Users: []string{"ann", "bob", "cat"},
		Members: map[string][]string{"r1": {"ann", "bob"}, "r3": {"cat"}}}, 10*time.Second)

	// b dies with ann and bob in r1 and an anonymous connection in r2: once
	// its leases end a takes over both its counts and the dispatching.
	b.crash()
	waitView(t, rcv, View{Rooms: []string{"r3"}, Users: []string{"cat"},
		Members: map[string][]string{"r3": {"cat"}}}, 15*time.Second)
	if !a.leader() {
		t.Error("a is not the dispatcher after b died")
	}
	a.w.Presence("r3", "cat", 0)
	waitView(t, rcv, View{}, 10*time.Second)

	st := rcv.Stats()
	if len(st.Violations) > 0 || st.BadSignatures > 0 {
		t.Errorf("violations %q, bad signatures %d", st.Violations, st.BadSignatures)
	}
	counts := map[string]int{}
	for _, e := range rcv.Events() {
		counts[strings.Join(names([]Event{e}), "")]++
	}
	want := map[string]int{"reset": 1,
		"room_occupied r1": 1, "room_occupied r2": 1, "room_occupied r3": 1,
		"room_vacated r1": 1, "room_vacated r2": 1, "room_vacated r3": 1,
		"user_online ann": 1, "user_online bob": 1, "user_online cat": 1,
		"user_offline ann": 1, "user_offline bob": 1, "user_offline cat": 1,
		"member_joined r1 ann": 1, "member_joined r1 bob": 1, "member_joined r3 cat": 1,
		"member_left r1 ann": 1, "member_left r1 bob": 1, "member_left r3 cat": 1}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("events\n got %v\nwant %v", counts, want)
	}
	t.Logf("receiver %+v, dispatcher a %+v", st, a.d.Stats())
}

// TestNATSWebhooksOnANATSCluster runs the webhooks on a NATS cluster of
// three nats-server processes, replicas 3: a user on two nodes, a
// published message, the node that had her last connection killed.
func TestNATSWebhooksOnANATSCluster(t *testing.T) {
	ps := testsupport.StartNATSCluster(t, 3)
	rcv := NewReceiver([]byte("k"))
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	cfg := NATSConfig{NATS: broker.NATSConfig{Replicas: 3, Lease: 2 * time.Second}}
	a := startNATSNode(t, testsupport.ClusterURL(ps), srv.URL, cfg)
	waitFor(t, "a to dispatch", a.leader)
	b := startNATSNode(t, testsupport.ClusterURL(ps), srv.URL, cfg)

	a.w.Presence("r", "ann", 1)
	waitView(t, rcv, View{Rooms: []string{"r"}, Users: []string{"ann"}, Members: map[string][]string{"r": {"ann"}}}, 10*time.Second)
	b.w.Presence("r", "ann", 2)
	b.w.Published("r", 7, []byte(`{"room":"r","seq":7,"text":"hi"}`))
	// b's changes, then a's: each node's go in its order, the two nodes'
	// in the order the stream took them.
	waitFor(t, "the message", func() bool { return slices.Contains(names(rcv.Events()), MessagePublished+" r") })
	a.w.Presence("r", "ann", 0)
	b.crash()
	waitView(t, rcv, View{}, 20*time.Second)

	var got []string
	var pub Event
	for _, e := range rcv.Events() {
		got = append(got, e.Name)
		if e.Name == MessagePublished {
			pub = e
		}
	}
	want := []string{"reset", "user_online", "room_occupied", "member_joined", "message_published", "member_left", "room_vacated", "user_offline"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if pub.Room != "r" || pub.Seq != 7 || string(pub.Message) != `{"room":"r","seq":7,"text":"hi"}` {
		t.Errorf("published event %+v", pub)
	}
	if st := rcv.Stats(); len(st.Violations) > 0 {
		t.Errorf("violations %q", st.Violations)
	}
}

// gate is a receiver that takes allow requests, then answers 503 until
// opened.
type gate struct {
	rcv     *Receiver
	allow   atomic.Int64
	open    atomic.Bool
	refused atomic.Int64
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.open.Load() && g.allow.Add(-1) < 0 {
		g.refused.Add(1)
		http.Error(w, "not now", http.StatusServiceUnavailable)
		return
	}
	g.rcv.ServeHTTP(w, r)
}

// TestNATSWebhooksDispatcherHandover: the dispatcher commits two events at
// a time, some of them part of one change's events, then its backend
// refuses; it stops, and the next dispatcher sends from the committed
// position: every event once (none sent twice, none lost), messages in
// order.
func TestNATSWebhooksDispatcherHandover(t *testing.T) {
	url := testsupport.StartNATS(t)
	g := &gate{rcv: NewReceiver([]byte("k"))}
	g.allow.Store(3)
	srv := httptest.NewServer(g)
	defer srv.Close()

	a := startNATSNode(t, url, srv.URL, NATSConfig{})
	waitFor(t, "a to dispatch", a.leader)
	b := startNATSNode(t, url, srv.URL, NATSConfig{})
	a.w.Presence("r1", "ann", 1) // 3 events
	a.w.Presence("r1", "bob", 1) // 2
	b.w.Presence("r2", "cat", 1) // 3
	for i := range 5 {
		a.w.Published("r1", uint64(i+1), []byte(`{"seq":`+strconv.Itoa(i+1)+`}`))
	}
	waitFor(t, "a's backend to refuse", func() bool { return g.refused.Load() > 0 })
	a.shutdown() // a's counts leave with it: 5 more events
	if b.leader() {
		t.Log("b took over at once")
	}
	g.open.Store(true)
	waitView(t, g.rcv, View{Rooms: []string{"r2"}, Users: []string{"cat"}, Members: map[string][]string{"r2": {"cat"}}}, 10*time.Second)
	waitFor(t, "the messages", func() bool { return len(g.rcv.Events()) >= 19 })

	st := g.rcv.Stats()
	if st.Duplicates != 0 || len(st.Violations) > 0 {
		t.Errorf("%d duplicates, violations %q", st.Duplicates, st.Violations)
	}
	var seqs []uint64
	ids := map[string]bool{}
	for _, e := range g.rcv.Events() {
		if ids[e.ID] {
			t.Errorf("event %s twice", e.ID)
		}
		ids[e.ID] = true
		if e.Name == MessagePublished {
			seqs = append(seqs, e.Seq)
		}
	}
	if want := []uint64{1, 2, 3, 4, 5}; !slices.Equal(seqs, want) {
		t.Errorf("messages %v, want %v", seqs, want)
	}
	if n := len(g.rcv.Events()); n != 19 { // reset, 3+2+3 in, 5 messages, 5 out
		t.Errorf("%d events, want 19: %q", n, names(g.rcv.Events()))
	}
	if !b.leader() {
		t.Error("b is not the dispatcher")
	}
}

// TestNATSWebhooksMessagesInOrder: two nodes publish in two rooms; each
// room's messages reach the backend once each, in seq order.
func TestNATSWebhooksMessagesInOrder(t *testing.T) {
	url := testsupport.StartNATS(t)
	rcv := NewReceiver([]byte("k"))
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	a := startNATSNode(t, url, srv.URL, NATSConfig{})
	b := startNATSNode(t, url, srv.URL, NATSConfig{})
	const n = 300
	var wg sync.WaitGroup
	for _, nd := range []struct {
		w    *NATS
		room string
	}{{a.w, "ra"}, {b.w, "rb"}} {
		wg.Go(func() {
			for i := range n {
				nd.w.Published(nd.room, uint64(i+1), []byte(`{"seq":`+strconv.Itoa(i+1)+`}`))
				if i%50 == 0 {
					time.Sleep(5 * time.Millisecond) // more than one message of changes
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, "every message", func() bool { return len(rcv.Events()) >= 2*n+1 })
	next := map[string]uint64{"ra": 1, "rb": 1}
	for _, e := range rcv.Events() {
		if e.Name != MessagePublished {
			continue
		}
		if e.Seq != next[e.Room] || string(e.Message) != `{"seq":`+strconv.FormatUint(e.Seq, 10)+`}` {
			t.Fatalf("room %s: message %d (%s), want %d", e.Room, e.Seq, e.Message, next[e.Room])
		}
		next[e.Room]++
	}
	if st := rcv.Stats(); st.Events != 2*n+1 || st.Duplicates != 0 {
		t.Errorf("receiver %+v, want %d events, no duplicate", st, 2*n+1)
	}
}

// TestNATSWebhooksFullStreamDrops: while the backend refuses, the stream
// fills (in messages, or in bytes) and refuses the node's next changes:
// each is counted, and once the backend takes events again a Dropped
// event tells it how many, ahead of the node's whole state.
func TestNATSWebhooksFullStreamDrops(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  NATSConfig
		msg  string
	}{
		{"messages", NATSConfig{MaxStream: 6}, `{"text":"hi"}`},
		{"bytes", NATSConfig{MaxStreamBytes: 8 << 10}, `{"text":"` + strings.Repeat("x", 1500) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := testsupport.StartNATS(t)
			g := &gate{rcv: NewReceiver([]byte("k"))}
			g.allow.Store(1) // the reset
			srv := httptest.NewServer(g)
			defer srv.Close()
			a := startNATSNode(t, url, srv.URL, tc.cfg)
			waitFor(t, "the reset", func() bool { return len(g.rcv.Events()) == 1 })
			a.w.Presence("r", "ann", 1)
			for i := range 30 {
				a.w.Published("r", uint64(i+1), []byte(tc.msg))
				time.Sleep(5 * time.Millisecond) // one message of changes each, or nearly
			}
			waitFor(t, "drops", func() bool { return a.w.Stats().Dropped > 0 })
			g.open.Store(true)
			var told, dropped uint64
			var seqs []uint64
			waitFor(t, "the dropped events", func() bool {
				told, seqs = 0, nil
				for _, e := range g.rcv.Events() {
					switch e.Name {
					case Dropped:
						told += e.Count
					case MessagePublished:
						seqs = append(seqs, e.Seq)
					}
				}
				dropped = a.w.Stats().Dropped
				return told == dropped && int(dropped)+len(seqs) >= 30
			})
			if dropped == 0 || int(dropped)+len(seqs) > 31 || !slices.IsSorted(seqs) { // 30 messages and ann's presence
				t.Errorf("%d dropped, messages %v: some lost without a count, or out of order", dropped, seqs)
			}
			waitView(t, g.rcv, View{Rooms: []string{"r"}, Users: []string{"ann"}, Members: map[string][]string{"r": {"ann"}}}, 10*time.Second)
			t.Logf("%d dropped, %d messages sent, receiver %+v", dropped, len(seqs), g.rcv.Stats())
		})
	}
}

// TestNATSTally pins natsTally's transitions, change by change, as
// TestWebhookScript pins lua/webhook.lua's.
func TestNATSTally(t *testing.T) {
	p := func(room, user string, n int) natsItem { return natsItem{Room: room, User: user, Count: n} }
	sync := func(node, inc string, items ...natsItem) natsChange {
		return natsChange{Op: natsOpSync, Node: node, Inc: inc, Begin: true, End: true, Items: items}
	}
	apply := func(node, inc string, items ...natsItem) natsChange {
		return natsChange{Op: natsOpApply, Node: node, Inc: inc, Items: items}
	}
	for _, tc := range []struct {
		name    string
		changes []natsChange
		want    []string
	}{
		{"the epoch's reset", []natsChange{{Op: natsOpEpoch, Epoch: "e"}, {Op: natsOpEpoch, Epoch: "old"}}, []string{"reset"}},
		{"a node unknown must sync first", []natsChange{apply("a", "1", p("r", "u", 1))}, nil},
		{"two nodes, one transition each way", []natsChange{
			sync("a", "1"), sync("b", "1"),
			apply("a", "1", p("r", "u", 1)), apply("b", "1", p("r", "u", 1)),
			apply("a", "1", p("r", "u", 0)), apply("b", "1", p("r", "u", 0))},
			[]string{"user_online u", "room_occupied r", "member_joined r u", "member_left r u", "room_vacated r", "user_offline u"}},
		{"sync sets to 0 what it does not name", []natsChange{
			sync("a", "1", p("r", "u", 2), p("s", "v", 1)), sync("a", "1", p("r", "u", 1))},
			[]string{"user_online u", "room_occupied r", "member_joined r u", "user_online v", "room_occupied s", "member_joined s v",
				"member_left s v", "room_vacated s", "user_offline v"}},
		{"a sync in parts", []natsChange{
			sync("a", "1", p("r", "u", 1), p("s", "v", 1)),
			{Op: natsOpSync, Node: "a", Inc: "1", Begin: true, Items: []natsItem{p("s", "v", 1)}},
			{Op: natsOpSync, Node: "a", Inc: "1", Items: []natsItem{p("t", "w", 1)}},
			{Op: natsOpSync, Node: "a", Inc: "1", End: true}},
			[]string{"user_online u", "room_occupied r", "member_joined r u", "user_online v", "room_occupied s", "member_joined s v",
				"user_online w", "room_occupied t", "member_joined t w", "member_left r u", "room_vacated r", "user_offline u"}},
		{"gone leaves another incarnation alone", []natsChange{sync("a", "2", p("r", "u", 1)), {Op: natsOpGone, Node: "a", Inc: "1"}},
			[]string{"user_online u", "room_occupied r", "member_joined r u"}},
		{"gone removes the node's counts", []natsChange{sync("a", "1", p("r", "", 3), p("r", "u", 1)), sync("b", "1", p("r", "u", 1)),
			{Op: natsOpGone, Node: "a", Inc: "1"}, apply("a", "1", p("r", "x", 1))},
			[]string{"room_occupied r", "user_online u", "member_joined r u"}},
		{"leave removes the node's counts", []natsChange{sync("a", "1", p("r", "", 3)), {Op: natsOpLeave, Node: "a", Inc: "1"}},
			[]string{"room_occupied r", "room_vacated r"}},
		{"a new incarnation's sync replaces the last's counts", []natsChange{sync("a", "1", p("r", "u", 1)), sync("a", "2", p("s", "u", 1))},
			[]string{"user_online u", "room_occupied r", "member_joined r u", "room_occupied s", "member_joined s u", "member_left r u", "room_vacated r"}},
		{"a message, even of an incarnation gone; drops first", []natsChange{
			{Op: natsOpApply, Node: "a", Inc: "old", Dropped: 4, Items: []natsItem{{Room: "r", Seq: 9, Msg: []byte(`{"seq":9}`)}}}},
			[]string{"dropped", "message_published r"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := newNATSTally()
			var got []string
			for i := range tc.changes {
				evs := tl.apply(uint64(i+1), 0, "e", &tc.changes[i])
				for j, e := range evs {
					if e.ID != "e:"+strconv.Itoa(i+1)+"-"+strconv.Itoa(j) {
						t.Errorf("event %d of change %d has ID %q", j, i+1, e.ID)
					}
				}
				got = append(got, names(evs)...)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("events\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestNATSTallyReloadsAtTheCursor replays random changes of three nodes
// through dispatchers that commit at random positions and die at random:
// some after writing the slots and before the cursor, some before
// writing anything. Each next dispatcher loads the bucket as of the
// cursor and replays the changes after it: the events it sends are the
// ones a single dispatcher decides (same IDs, none missing, none twice
// but those after the last cursor), and its tally is that dispatcher's.
func TestNATSTallyReloadsAtTheCursor(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var changes []natsChange
	incs := map[string]int{"a": 1, "b": 1, "c": 1}
	inc := func(n string) string { return strconv.Itoa(incs[n]) }
	for _, n := range []string{"a", "b", "c"} {
		changes = append(changes, natsChange{Op: natsOpSync, Node: n, Inc: inc(n), Begin: true, End: true})
	}
	for range 400 {
		n := []string{"a", "b", "c"}[rng.IntN(3)]
		switch r := rng.IntN(20); {
		case r == 0:
			changes = append(changes, natsChange{Op: natsOpGone, Node: n, Inc: inc(n)})
			incs[n]++
			changes = append(changes, natsChange{Op: natsOpSync, Node: n, Inc: inc(n), Begin: true, End: true,
				Items: []natsItem{{Room: "r0", User: "u0", Count: 1}}})
		case r == 1:
			var items []natsItem
			for range rng.IntN(4) {
				items = append(items, natsItem{Room: "r" + strconv.Itoa(rng.IntN(3)), User: "u" + strconv.Itoa(rng.IntN(3)), Count: 1 + rng.IntN(2)})
			}
			changes = append(changes, natsChange{Op: natsOpSync, Node: n, Inc: inc(n), Begin: true, End: true, Items: items})
		default:
			var items []natsItem
			for range 1 + rng.IntN(3) {
				items = append(items, natsItem{Room: "r" + strconv.Itoa(rng.IntN(3)), User: "u" + strconv.Itoa(rng.IntN(4)), Count: rng.IntN(3)})
			}
			changes = append(changes, natsChange{Op: natsOpApply, Node: n, Inc: inc(n), Items: items})
		}
	}
	ref := newNATSTally() // one dispatcher that never dies
	var want []string
	for i := range changes {
		for _, e := range ref.apply(uint64(i+1), 0, "e", &changes[i]) {
			want = append(want, e.ID+" "+strings.Join(names([]Event{e}), ""))
		}
	}

	bucket := map[string]natsStored{}
	var cur natsCursor
	var sent []string
	for dispatchers := 0; cur.Base < uint64(len(changes)); dispatchers++ {
		if dispatchers > 1000 {
			t.Fatal("no progress")
		}
		tl := newNATSTally() // a new dispatcher: the bucket as of the cursor
		for k, s := range bucket {
			if err := tl.load(k, s.at(cur.Base)); err != nil {
				t.Fatal(err)
			}
		}
		var buf []natsEvent
		read := cur.Base
		for read < uint64(len(changes)) && len(buf) < 1+rng.IntN(30) {
			read++
			for i, e := range tl.apply(read, 0, "e", &changes[read-1]) {
				if read == cur.Seq && i < cur.Next {
					continue
				}
				buf = append(buf, natsEvent{e, read, i})
			}
		}
		for len(buf) > 0 || read > cur.Base {
			n := min(len(buf), 1+rng.IntN(5))
			next := cur
			next.Base = read
			if n > 0 {
				next.Seq, next.Next = buf[n-1].seq, buf[n-1].idx+1
				if n < len(buf) {
					next.Base = buf[n].seq - 1
				}
			}
			for _, e := range buf[:n] { // the backend takes them
				sent = append(sent, e.ev.ID+" "+strings.Join(names([]Event{e.ev}), ""))
			}
			die := rng.IntN(6)
			if die == 0 { // before writing anything
				break
			}
			for _, wr := range tl.upTo(next.Base) {
				bucket[wr.key] = wr.val
			}
			if die == 1 { // between the slots and the cursor
				break
			}
			cur = next
			tl.dropJournal(cur.Base)
			for k, s := range bucket { // the zeros deleted
				if s.S <= cur.Base && s.V == (natsSlot{}) {
					delete(bucket, k)
				}
			}
			buf = buf[n:]
			if len(buf) == 0 {
				break // read more
			}
		}
	}
	// Events sent twice are those after a cursor a dispatcher died
	// before writing: dropped by ID, they are want, in order.
	seen := map[string]bool{}
	var got []string
	for _, s := range sent {
		if !seen[s] {
			seen[s] = true
			got = append(got, s)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sent (deduplicated) %d events, want %d; first difference at %s", len(got), len(want), firstDiff(got, want))
	}
	final := newNATSTally()
	for k, s := range bucket {
		if err := final.load(k, s.at(cur.Base)); err != nil {
			t.Fatal(err)
		}
	}
	if !maps.Equal(final.counts, ref.counts) || !maps.Equal(final.nodes, ref.nodes) || !maps.Equal(final.rooms, ref.rooms) ||
		!maps.Equal(final.users, ref.users) || !maps.Equal(final.members, ref.members) {
		t.Errorf("the bucket's tally differs from the reference's")
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("%d: %q vs %q", i, a[i], b[i])
		}
	}
	return strconv.Itoa(min(len(a), len(b)))
}

// TestNATSWebhooksNodeLeaseLapses: a node whose lease key is deleted (as
// if it had lapsed) is gone for the dispatcher, and comes back as a new
// incarnation with its whole state: the backend sees it leave and come
// back, in turn.
func TestNATSWebhooksNodeLeaseLapses(t *testing.T) {
	url := testsupport.StartNATS(t)
	rcv := NewReceiver([]byte("k"))
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	a := startNATSNode(t, url, srv.URL, NATSConfig{})
	waitFor(t, "a to dispatch", a.leader)
	b := startNATSNode(t, url, srv.URL, NATSConfig{})
	b.w.Presence("r", "bob", 1)
	want := View{Rooms: []string{"r"}, Users: []string{"bob"}, Members: map[string][]string{"r": {"bob"}}}
	waitView(t, rcv, want, 10*time.Second)
	b.w.mu.Lock()
	old := b.w.inc
	b.w.mu.Unlock()
	if err := b.w.leases.Delete(context.Background(), b.w.id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's new incarnation", func() bool { b.w.mu.Lock(); defer b.w.mu.Unlock(); return b.w.inc != old })
	waitView(t, rcv, want, 10*time.Second)
	if st := rcv.Stats(); len(st.Violations) > 0 {
		t.Errorf("violations %q", st.Violations)
	}
	t.Logf("events %q", names(rcv.Events()))
}
