package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// jobsOf writes a round's jobs as "kind:room:seq" words.
func jobsOf(batch []job) string {
	var w []string
	for _, j := range batch {
		w = append(w, fmt.Sprintf("%d:%s:%d", j.kind, j.room, j.e.Seq))
	}
	return strings.Join(w, " ")
}

// Writes of owned rooms wait out the rounds of other jobs for the history
// linger, then go out together, behind the round's other jobs, with a
// room's side by side (one stream entry a room: persist.lua), each room's in
// seq order; a room's release takes the writes queued before it along,
// ahead of it.
func TestPublisherTakeRound(t *testing.T) {
	persist := func(room string, seq uint64) job { return job{kind: jobPersist, room: room, e: Entry{Seq: seq}} }
	send := job{kind: jobSend, node: "n", room: "s"}
	t0 := time.Now()
	for _, tc := range []struct {
		name   string
		jobs   []job
		at     time.Duration // when the round is taken, after the jobs were queued
		want   string
		isHeld bool
	}{
		{"writes held for the linger", []job{persist("b", 1), send, persist("a", 1)},
			time.Millisecond, "3:s:0", true},
		{"then a room's writes side by side", []job{persist("b", 1), persist("a", 1), send, persist("b", 2), persist("a", 2)},
			time.Second, "3:s:0 0:a:1 0:a:2 0:b:1 0:b:2", false},
		{"a release takes the writes before it along", []job{persist("b", 1), persist("a", 1), {kind: jobRelease, room: "a", e: Entry{Seq: 1}}, persist("c", 1)},
			time.Millisecond, "0:b:1 0:a:1 1:a:1 0:c:1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newPublisher(100*time.Millisecond, 0)
			q.add(tc.jobs...)
			batch, held := q.takeRound(nil, t0.Add(tc.at))
			if got := jobsOf(batch); got != tc.want || held != tc.isHeld {
				t.Errorf("round %q (held %v), want %q (held %v)", got, held, tc.want, tc.isHeld)
			}
		})
	}
}

// Past maxHeldWrites the writes held go out at the next round, linger or
// not, and add says so (the caller wakes the loop).
func TestPublisherSendsWritesPastTheBound(t *testing.T) {
	q := newPublisher(time.Hour, 0)
	for i := range maxHeldWrites - 1 {
		if full, _ := q.add(job{kind: jobPersist, room: "r", e: Entry{Seq: uint64(i + 1)}}); full {
			t.Fatalf("full after %d writes", i+1)
		}
	}
	if batch, held := q.takeRound(nil, time.Now()); len(batch) != 0 || !held {
		t.Fatalf("below the bound: a round of %d jobs (held %v), want the writes held", len(batch), held)
	}
	if full, _ := q.add(job{kind: jobPersist, room: "r", e: Entry{Seq: maxHeldWrites}}); !full {
		t.Fatal("the bound reached, add did not say so")
	}
	if batch, held := q.takeRound(nil, time.Now()); len(batch) != maxHeldWrites || held {
		t.Fatalf("at the bound: a round of %d jobs (held %v), want all %d", len(batch), held, maxHeldWrites)
	}
}

// add says when a write moves the time the writes are due nearer, and
// only then: the loop waiting for them is woken for that alone, not for
// every message.
func TestPublisherWakesOnlyWhenWritesAreDueSooner(t *testing.T) {
	q := newPublisher(5*time.Millisecond, time.Second)
	steps := []struct {
		name   string
		j      job
		sooner bool
	}{
		{"the first write, of a followed room", job{kind: jobPersist, room: "f", followed: true}, true},
		{"another of a followed room", job{kind: jobPersist, room: "f", followed: true}, false},
		{"the first of a room nobody follows", job{kind: jobPersist, room: "a"}, true},
		{"another of a room nobody follows", job{kind: jobPersist, room: "a"}, false},
		{"another room's", job{kind: jobPersist, room: "b"}, false},
		{"a record for another node", job{kind: jobSend, node: "n", room: "f"}, false},
	}
	for _, s := range steps {
		if _, sooner := q.add(s.j); sooner != s.sooner {
			t.Errorf("%s: sooner %v, want %v", s.name, sooner, s.sooner)
		}
	}
	if batch, held := q.takeRound(nil, time.Now().Add(time.Hour)); held || len(batch) != 6 {
		t.Fatalf("a round long after: %d jobs (held %v), want all 6", len(batch), held)
	}
	if _, sooner := q.add(job{kind: jobPersist, room: "a"}); !sooner {
		t.Error("the first write after a round: not sooner")
	}
}

// At shutdown every pending job goes out once: what takeWrites took is
// gone, so the records for other nodes the handover sent (a publish
// forwarded to an owner among them) are not sent again by signOff's
// takeSends, which had an owner order such a publish twice.
func TestPublisherTakeWritesTakesThemOnce(t *testing.T) {
	q := newPublisher(time.Hour, 0)
	q.add(job{kind: jobPersist, room: "b", e: Entry{Seq: 1}}, job{kind: jobRelease, room: "r", e: Entry{Seq: 3}},
		job{kind: jobSend, room: "s", e: Entry{Seq: 7}}, job{kind: jobPersist, room: "a", e: Entry{Seq: 1}})
	if got, want := jobsOf(q.takeWrites()), "0:a:1 0:b:1 1:r:3 3:s:7"; got != want {
		t.Errorf("takeWrites: %s, want %s", got, want)
	}
	if sends := q.takeSends(); len(sends) != 0 {
		t.Errorf("takeSends after takeWrites: %s, want none (sent twice)", jobsOf(sends))
	}
	if got := jobsOf(q.takeWrites()); got != "" {
		t.Errorf("takeWrites again: %s, want none", got)
	}
	if left, _ := q.takeRound(nil, time.Now()); len(left) != 0 {
		t.Errorf("what is left: %s, want nothing", jobsOf(left))
	}
}

// Writes of rooms other nodes follow wait the followed linger, not the
// history linger: their followers hold the messages too (redis_fill.go).
// A write of a room nobody follows takes them all along once its own,
// shorter, linger passed, so every room's writes keep their order.
func TestPublisherHoldsFollowedWritesLonger(t *testing.T) {
	write := func(room string, seq uint64, followed bool) job {
		return job{kind: jobPersist, room: room, e: Entry{Seq: seq}, followed: followed}
	}
	t0 := time.Now()
	for _, tc := range []struct {
		name   string
		jobs   []job
		at     time.Duration
		want   string
		isHeld bool
		dueIn  time.Duration // at the round, within 5 ms (add reads its own clock)
	}{
		{"followed: past the history linger, held", []job{write("f", 1, true), write("g", 1, true)},
			50 * time.Millisecond, "", true, time.Second - 50*time.Millisecond},
		{"followed: past the followed linger, out", []job{write("f", 1, true), write("g", 1, true)},
			1100 * time.Millisecond, "0:f:1 0:g:1", false, 0},
		{"one room nobody follows takes them along", []job{write("f", 1, true), write("a", 1, false), write("f", 2, true)},
			50 * time.Millisecond, "0:a:1 0:f:1 0:f:2", false, 0},
		{"one room nobody follows, within its linger", []job{write("f", 1, true), write("a", 1, false)},
			time.Millisecond, "", true, 9 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newPublisher(10*time.Millisecond, time.Second)
			q.add(tc.jobs...)
			if d := q.dueIn(t0.Add(tc.at)); (d - tc.dueIn).Abs() > 5*time.Millisecond {
				t.Errorf("dueIn %s, want %s", d, tc.dueIn)
			}
			batch, held := q.takeRound(nil, t0.Add(tc.at))
			if got := jobsOf(batch); got != tc.want || held != tc.isHeld {
				t.Errorf("round %q (held %v), want %q (held %v)", got, held, tc.want, tc.isHeld)
			}
		})
	}
}

// A round carries about maxRoundWrites of the writes due, never part of a
// room's: the rest are held, due at once, and go in the rounds right after,
// each room's writes in one round and in their order, every write once.
// One round of a second's writes of a busy node held the records queued
// behind it for as long as Redis ran its many calls.
func TestPublisherSpreadsWritesOverRounds(t *testing.T) {
	q := newPublisher(time.Millisecond, 0)
	const rooms, each = 300, 3
	for s := range each {
		for r := range rooms {
			q.add(job{kind: jobPersist, room: fmt.Sprintf("r%03d", r), e: Entry{Seq: uint64(s + 1)}})
		}
	}
	at := time.Now().Add(time.Second) // the linger passed
	seen := map[string]uint64{}       // room → the last seq taken
	total := 0
	for round := 1; ; round++ {
		batch, held := q.takeRound(nil, at)
		if n := len(batch); n == 0 || n > maxRoundWrites+each {
			t.Fatalf("round %d: %d writes, want 1 to %d", round, n, maxRoundWrites+each)
		}
		for _, j := range batch {
			if j.e.Seq != seen[j.room]+1 {
				t.Fatalf("round %d: %s seq %d after %d", round, j.room, j.e.Seq, seen[j.room])
			}
			seen[j.room] = j.e.Seq
		}
		if last := batch[len(batch)-1]; seen[last.room] != each {
			t.Errorf("round %d left part of room %s's writes", round, last.room)
		}
		total += len(batch)
		if !held {
			break
		}
		if d := q.dueIn(at); d != 0 {
			t.Fatalf("round %d held writes not due (in %s)", round, d)
		}
	}
	if total != rooms*each {
		t.Fatalf("the rounds carried %d writes, want %d", total, rooms*each)
	}
}

// A room's release queued while a round sorted its writes goes after the
// writes that round left: they move ahead of every job pending, in order.
func TestPublisherLeavesWritesAheadOfARelease(t *testing.T) {
	q := newPublisher(time.Millisecond, 0)
	q.add(job{kind: jobSend, node: "n", room: "s"})
	q.add(job{kind: jobRelease, room: "a", e: Entry{Seq: 2}}) // came while the round sorted
	q.leave([]job{{kind: jobPersist, room: "a", e: Entry{Seq: 1}}, {kind: jobPersist, room: "a", e: Entry{Seq: 2}}})
	batch, _ := q.takeRound(nil, time.Now())
	if got, want := jobsOf(batch), "0:a:1 0:a:2 3:s:0 1:a:2"; got != want {
		t.Errorf("round %q, want %q", got, want)
	}
}

// backlog queues n writes, three to a room, and takes the first round,
// which leaves the rest due.
func backlog(n int) *publisher {
	q := new(publisher)
	*q = newPublisher(time.Millisecond, 0)
	for i := range n {
		q.add(job{kind: jobPersist, room: fmt.Sprintf("r%06d", i/3), e: Entry{Seq: uint64(i%3 + 1)}})
	}
	q.takeRound(nil, time.Now().Add(time.Second))
	return q
}

// The writes a round left are taken from the front, a round at a time,
// neither copied nor sorted again: a round costs the same whatever the
// backlog (it sorted and copied the whole backlog, which a node past the
// knee let grow round after round).
func TestPublisherDrainsABacklogWithoutCopying(t *testing.T) {
	q := backlog(20 * maxRoundWrites)
	into := make([]job, 0, 2*maxRoundWrites)
	allocs := testing.AllocsPerRun(10, func() {
		batch, held := q.takeRound(into[:0], time.Now())
		if len(batch) == 0 || !held {
			t.Fatalf("a round of %d writes (held %v) with a backlog left", len(batch), held)
		}
		clear(batch)
	})
	if allocs != 0 {
		t.Errorf("a round of the backlog allocates %.0f times, want 0", allocs)
	}
}

// BenchmarkPublisherBacklog is a round's cost to the publish loop with a
// backlog of writes due, 3 to a room: about maxRoundWrites jobs appended.
func BenchmarkPublisherBacklog(b *testing.B) {
	for _, n := range []int{4096, 65536} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			into := make([]job, 0, 2*maxRoundWrites)
			q := backlog(n)
			for b.Loop() {
				batch, held := q.takeRound(into[:0], time.Now())
				clear(batch)
				if !held {
					b.StopTimer()
					q = backlog(n)
					b.StartTimer()
				}
			}
		})
	}
}

// writes counts the writes of owned rooms pending, persists and due alike,
// through every way they come and go.
func TestPublisherCountsWritesPending(t *testing.T) {
	q := new(publisher)
	*q = newPublisher(time.Millisecond, 0)
	want := func(step string, n int64) {
		t.Helper()
		if got := q.writes.Load(); got != n {
			t.Errorf("%s: %d writes pending, want %d", step, got, n)
		}
	}
	for i := range 3 * maxRoundWrites {
		q.add(job{kind: jobPersist, room: fmt.Sprintf("r%04d", i), e: Entry{Seq: 1}})
	}
	q.add(job{kind: jobSend, node: "n", room: "s"})
	want("queued", 3*maxRoundWrites)
	q.takeRound(nil, time.Now().Add(time.Second))
	want("a round taken, the rest due", 2*maxRoundWrites)
	q.takeRound(nil, time.Now())
	want("a round of the due", maxRoundWrites)
	q.add(job{kind: jobPersist, room: "late", e: Entry{Seq: 1}})
	want("one more", maxRoundWrites+1)
	q.add(job{kind: jobRelease, room: "x"})
	want("a release took them along", 0)
	q.add(job{kind: jobPersist, room: "a", e: Entry{Seq: 1}})
	q.takeWrites()
	want("taken at shutdown", 0)
}
