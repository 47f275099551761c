package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRooms is a Handler that records what a broker asks of a node: it keeps
// each room's seq and delivered messages the way room.Hub does (duplicates
// dropped, local publishes numbered after the latest seq), and signals every
// change so that tests wait on conditions, not on time.
type fakeRooms struct {
	mu       sync.Mutex
	presence map[string]map[string]int // room → "node/user" → connections
	changed  chan struct{}
	rooms    map[string]*fakeRoom
	calls    []string
	nextID   uint64
	waiters  map[uint64]chan<- uint64 // publishes' IDs → where their answer goes (publishTo)

	// unsubscribe is the broker's Unsubscribe, which Drop calls for a room
	// it dropped, as room.Hub does (nil: not called).
	unsubscribe func(room string)
}

type fakeRoom struct {
	owned   bool // ordered a message here (PublishOwned)
	dropped bool

	loaded bool
	early  []Entry // delivered before the load, as room.Hub keeps them (a follower's records may beat its snapshot)
	seq    uint64
	msgs   []Entry // delivered or published here, in order
	tail   []Entry // what Loaded brought
	epoch  string
}

func newFakeRooms() *fakeRooms {
	return &fakeRooms{changed: make(chan struct{}), rooms: map[string]*fakeRoom{}, waiters: map[uint64]chan<- uint64{}}
}

// note records a call and wakes the waiters. Called with f.mu held.
func (f *fakeRooms) note(call string) {
	f.calls = append(f.calls, call)
	close(f.changed)
	f.changed = make(chan struct{})
}

// open creates the room as the hub does before asking the broker for it.
func (f *fakeRooms) open(name string) {
	f.mu.Lock()
	f.rooms[name] = &fakeRoom{}
	f.mu.Unlock()
}

func (f *fakeRooms) Loaded(name, epoch string, seq uint64, tail []Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rooms[name]
	if r == nil || r.loaded {
		return
	}
	r.loaded, r.tail, r.epoch = true, tail, epoch
	r.seq = seq
	for _, e := range tail {
		r.seq = max(r.seq, e.Seq)
	}
	f.note(fmt.Sprintf("loaded %s %d", name, r.seq))
	early := r.early
	r.early = nil
	for _, e := range early {
		if e.Seq == r.seq+1 {
			r.seq = e.Seq
			r.msgs = append(r.msgs, e)
		}
	}
}

func (f *fakeRooms) Deliver(name string, seq uint64, payload []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rooms[name]
	if r != nil && !r.loaded {
		r.early = append(r.early, Entry{seq, payload})
		return
	}
	if r == nil || seq <= r.seq {
		return
	}
	r.seq = seq
	r.msgs = append(r.msgs, Entry{seq, payload})
	f.note(fmt.Sprintf("deliver %s %d", name, seq))
}

func (f *fakeRooms) DeliverMany(msgs []Delivered) {
	for _, m := range msgs {
		f.Deliver(m.Room, m.Seq, m.Payload)
	}
	f.mu.Lock()
	f.note(fmt.Sprintf("deliver many %d", len(msgs)))
	f.mu.Unlock()
}

func (f *fakeRooms) PublishLocal(p Publication) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rooms[p.Room]
	if r == nil {
		return 0, false
	}
	r.seq++
	payload := string(p.Prefix) + strconv.FormatUint(r.seq, 10) + string(p.Suffix)
	r.msgs = append(r.msgs, Entry{r.seq, []byte(payload)})
	f.note(fmt.Sprintf("local %s %d", p.Room, r.seq))
	return r.seq, true
}

func (f *fakeRooms) Seq(name string) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rooms[name]
	if r == nil {
		return 0, false
	}
	return r.seq, r.loaded
}

func (f *fakeRooms) Epoch(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.rooms[name]; r != nil {
		return r.epoch
	}
	return ""
}

func (f *fakeRooms) Position(name string) (string, uint64, bool) {
	seq, loaded := f.Seq(name)
	return f.Epoch(name), seq, loaded
}

func (f *fakeRooms) PublishOwned(p Publication, from uint64, keep func(string, Entry)) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rooms[p.Room]
	if r == nil || !r.loaded || r.seq < from {
		return 0, false
	}
	r.owned = true
	r.seq++
	payload := []byte(string(p.Prefix) + strconv.FormatUint(r.seq, 10) + string(p.Suffix))
	r.msgs = append(r.msgs, Entry{r.seq, payload})
	keep(p.Room, Entry{r.seq, payload})
	f.note(fmt.Sprintf("owned %s %d", p.Room, r.seq))
	return r.seq, true
}

func (f *fakeRooms) Follow(name string, from uint64, add func(string, uint64, []Entry)) (string, uint64, []Entry, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rooms[name]
	if r == nil || !r.loaded || r.seq < from {
		return "", 0, nil, false
	}
	tail := append([]Entry(nil), r.msgs...)
	add(r.epoch, r.seq, tail)
	f.note("follow " + name)
	return r.epoch, r.seq, tail, true
}

func (f *fakeRooms) LeaseRenewed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.note("lease renewed")
}

func (f *fakeRooms) Drop(name string, keep func(epoch string, seq uint64, tail []Entry)) bool {
	if !f.drop(name, keep) {
		return false
	}
	if f.unsubscribe != nil {
		f.unsubscribe(name) // after the lock, as the hub's flush
	}
	return true
}

func (f *fakeRooms) drop(name string, keep func(epoch string, seq uint64, tail []Entry)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rooms[name]
	if r == nil {
		return false
	}
	if keep != nil && r.loaded {
		keep(r.epoch, r.seq, append([]Entry(nil), r.msgs...))
	}
	r.dropped = true
	delete(f.rooms, name)
	f.note("drop " + name)
	return true
}

func (f *fakeRooms) RemotePresence(room, node, user string, count int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.presence == nil {
		f.presence = map[string]map[string]int{}
	}
	if f.presence[room] == nil {
		f.presence[room] = map[string]int{}
	}
	if count > 0 {
		f.presence[room][node+"/"+user] = count
	} else {
		delete(f.presence[room], node+"/"+user)
	}
	f.note(fmt.Sprintf("presence %s %s %s %d", room, node, user, count))
}

func (f *fakeRooms) NodeGone(node string) map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	gone := map[string][]string{}
	for room, m := range f.presence {
		for k := range m {
			if n, u, _ := strings.Cut(k, "/"); n == node {
				gone[room] = append(gone[room], u)
				delete(m, k)
			}
		}
	}
	f.note("gone " + node)
	return gone
}

// waitFor waits until cond (called with f.mu held) holds, or fails the test
// after timeout.
func (f *fakeRooms) waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("waiting for %s: calls so far %q", what, f.calls)
		}
	}
}

// payloads returns the room's messages as "seq:payload".
func (f *fakeRooms) payloads(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	if r := f.rooms[name]; r != nil {
		for _, m := range r.msgs {
			out = append(out, fmt.Sprintf("%d:%s", m.Seq, m.Payload))
		}
	}
	return out
}

func (f *fakeRooms) Disconnect(d Disconnect) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.note("disconnect " + d.User + " " + d.Conn + " " + d.Reason)
}

// Settled records a refusal (seq 0) with the message's payload and ID, and
// "busy" for one the owner refused past its capacity (ErrOverloaded), and
// hands the answer to the publish's waiter (publishTo).
func (f *fakeRooms) Settled(p Publication, seq uint64, err error) {
	f.mu.Lock()
	ch := f.waiters[p.ID]
	delete(f.waiters, p.ID)
	if seq == 0 {
		f.note(fmt.Sprintf("refused %s %s%s %d", p.Room, p.Prefix, p.Suffix, p.ID))
	}
	if errors.Is(err, ErrOverloaded) {
		f.note("busy " + p.Room)
	}
	f.mu.Unlock()
	if ch != nil {
		ch <- seq
	}
}

// answerOf waits for a publish's answer on ch (publishTo) and fails the
// test, naming what, when none comes within 10 s.
func answerOf(t testing.TB, ch <-chan uint64, what string) uint64 {
	t.Helper()
	select {
	case seq := <-ch:
		return seq
	case <-time.After(10 * time.Second):
		t.Fatal(what + " got no answer")
		return 0
	}
}

// publishTo publishes p on b, whose handler f is, and sends its answer to
// ch: the seq Publish returned, or the one Settled brings later (0: refused
// or given up). ch must have room for it.
func (f *fakeRooms) publishTo(b Broker, p Publication, ch chan<- uint64) {
	f.mu.Lock()
	f.nextID++
	p.ID = f.nextID
	f.waiters[p.ID] = ch
	f.mu.Unlock()
	seq, err := b.Publish(p)
	if seq == 0 && err == nil {
		return // on its way: Settled answers
	}
	f.mu.Lock()
	delete(f.waiters, p.ID)
	f.mu.Unlock()
	ch <- seq
}
