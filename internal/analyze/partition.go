package analyze

import (
	"math"

	"github.com/scalechat/scalechat/internal/results"
)

// event is a parsed row reduced to what the join needs.
type event struct {
	t      int64
	sender uint64
	msg    uint64
	client uint64
	sr     uint32 // step-room id (Joined and Sent rows)
	step   uint32
	kind   results.Kind
}

// partitionJob is one chunk's events for one partition, in input order, and the
// chunk's Joined rows, which every partition sees.
type partitionJob struct {
	events *[]event
	joins  []event
	// wm (watermark): every input has been read up to this unix_us, so
	// Joined rows at or before it are all known.
	wm int64
}

// queued is a message waiting for its deliveries, in arrival order.
type queued struct {
	sender, msg uint64
	due         int64
}

// fifo is a slice-backed queue.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) push(v T)  { q.items = append(q.items, v) }
func (q *fifo[T]) len() int  { return len(q.items) - q.head }
func (q *fifo[T]) front() *T { return &q.items[q.head] }
func (q *fifo[T]) pop() {
	q.head++
	if q.head > 4096 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		q.items = q.items[:n]
		q.head = 0
	}
}

// pendingRecv holds Received rows that arrived before their Sent row (rows
// of the sender's and the recipient's parser files are merged chunk by
// chunk, so a few arrive early).
type pendingRecv struct {
	first int64
	step  uint32
	times []int64
}

// stepAcc is one partition's totals for one step.
type stepAcc struct {
	sent, expected, received, lost, orphans, duplicates int64
	lat                                                 *latAcc
	first, last                                         int64
	clients                                             map[uint64]struct{}
}

// roomAcc is one partition's totals for one step-room.
type roomAcc struct {
	members                        int64
	sent, expected, received, lost int64
	latSum, latMax                 int64
	joins                          []int64 // sorted join times
	active                         bool
}

// seriesKey is one interval of one step.
type seriesKey struct {
	step uint32
	idx  int64
}

type seriesAcc struct {
	sent, recv int64
	hist       logHist
}

// partition owns the messages whose key hashes to it: it joins their Sent and
// Received rows and keeps the statistics, without locks.
type partition struct {
	id       int
	window   int64 // µs after the due time a delivery is still matched
	settle   int64 // µs after the due time Joined rows are assumed complete
	interval int64 // µs per time-series bucket
	fixed    []int64
	old      []bool

	msgs    *msgTable
	queue   fifo[queued] // every message, by arrival
	late    fifo[queued] // messages still missing deliveries after settle
	pending map[[2]uint64]*pendingRecv
	pqueue  fifo[queued] // pending keys by first receive time

	steps  []*stepAcc
	rooms  []roomAcc
	series map[seriesKey]*seriesAcc
	lastSK seriesKey
	lastSA *seriesAcc
	// peak is the most messages held at once, the measure of memory.
	peak int
}

func newPartition(id int, window, settle, interval int64) *partition {
	return &partition{
		id: id, window: window, settle: settle, interval: interval,
		msgs:    newMsgTable(),
		pending: make(map[[2]uint64]*pendingRecv),
		series:  make(map[seriesKey]*seriesAcc),
	}
}

func (s *partition) step(id uint32) *stepAcc {
	for int(id) >= len(s.steps) {
		s.steps = append(s.steps, nil)
	}
	a := s.steps[id]
	if a == nil {
		a = &stepAcc{lat: newLatAcc(), first: math.MaxInt64, last: math.MinInt64}
		s.steps[id] = a
	}
	return a
}

func (s *partition) room(id uint32) *roomAcc {
	if int(id) >= len(s.rooms) {
		n := max(int(id)+1, 2*len(s.rooms))
		r := make([]roomAcc, n)
		copy(r, s.rooms)
		s.rooms = r
	}
	return &s.rooms[id]
}

func (s *partition) seriesAt(step uint32, t int64) *seriesAcc {
	k := seriesKey{step, floorDiv(t, s.interval)}
	if s.lastSA != nil && k == s.lastSK {
		return s.lastSA
	}
	a := s.series[k]
	if a == nil {
		a = &seriesAcc{}
		s.series[k] = a
	}
	s.lastSK, s.lastSA = k, a
	return a
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func (s *partition) seen(a *stepAcc, t int64) {
	if t < a.first {
		a.first = t
	}
	if t > a.last {
		a.last = t
	}
}

// apply processes one chunk's rows, then finalizes what the watermark allows.
func (s *partition) apply(j partitionJob) {
	for i := range j.joins {
		e := &j.joins[i]
		r := s.room(e.sr)
		r.active = true
		r.members++
		r.joins = insertSorted(r.joins, e.t)
		a := s.step(e.step)
		s.seen(a, e.t)
		if s.id == 0 {
			if a.clients == nil {
				a.clients = make(map[uint64]struct{})
			}
			a.clients[e.client] = struct{}{}
		}
	}
	evs := *j.events
	for i := range evs {
		e := &evs[i]
		switch e.kind {
		case results.Sent:
			s.sent(e)
		case results.Received:
			s.received(e)
		}
	}
	s.evict(j.wm)
}

func (s *partition) countClient(a *stepAcc, step uint32, c uint64) {
	if int(step) < len(s.old) && s.old[step] {
		if a.clients == nil {
			a.clients = make(map[uint64]struct{})
		}
		a.clients[c] = struct{}{}
	}
}

func (s *partition) sent(e *event) {
	a := s.step(e.step)
	s.seen(a, e.t)
	s.countClient(a, e.step, e.client)
	m, added := s.msgs.insert(e.sender, e.msg)
	if !added {
		a.duplicates++
		return
	}
	m.due, m.sr, m.step = e.t, e.sr, e.step
	a.sent++
	r := s.room(e.sr)
	r.active = true
	r.sent++
	s.seriesAt(e.step, e.t).sent++
	s.queue.push(queued{e.sender, e.msg, e.t})
	s.peak = max(s.peak, s.msgs.len())
	if len(s.pending) > 0 {
		k := [2]uint64{e.sender, e.msg}
		if p := s.pending[k]; p != nil {
			delete(s.pending, k)
			for _, t := range p.times {
				s.deliver(m, a, t)
			}
		}
	}
}

func (s *partition) received(e *event) {
	m := s.msgs.get(e.sender, e.msg)
	if m == nil {
		k := [2]uint64{e.sender, e.msg}
		p := s.pending[k]
		if p == nil {
			p = &pendingRecv{first: e.t, step: e.step}
			s.pending[k] = p
			s.pqueue.push(queued{e.sender, e.msg, e.t})
		}
		p.times = append(p.times, e.t)
		return
	}
	a := s.step(m.step)
	s.countClient(a, m.step, e.client)
	s.deliver(m, a, e.t)
}

func (s *partition) deliver(m *msgEntry, a *stepAcc, t int64) {
	m.recv++
	a.received++
	s.seen(a, t)
	lat := t - m.due
	a.lat.record(lat)
	r := &s.rooms[m.sr]
	r.received++
	r.latSum += lat
	r.latMax = max(r.latMax, lat)
	sa := s.seriesAt(m.step, t)
	sa.recv++
	sa.hist.record(lat)
}

// expected counts the deliveries a message is owed: its room's members
// joined at or before its due time, or the fixed room size of the older
// format.
func (s *partition) expected(m *msgEntry) int64 {
	if int(m.step) < len(s.fixed) && s.fixed[m.step] > 0 {
		return s.fixed[m.step]
	}
	return int64(results.Owed(s.rooms[m.sr].joins, joinTime, m.due))
}

// joinTime reads a join time of a room's sorted joins for results.Owed.
func joinTime(t int64) int64 { return t }

func (s *partition) finalize(m *msgEntry, exp int64) {
	a := s.steps[m.step]
	a.expected += exp
	lost := max(exp-int64(m.recv), 0)
	a.lost += lost
	r := &s.rooms[m.sr]
	r.expected += exp
	r.lost += lost
	s.msgs.remove(m.sender, m.msg)
}

// evict finalizes the messages the watermark allows: complete ones once
// their room's joins are settled, incomplete ones once the window is over.
// Memory is thereby bounded by the messages in flight, not by file size.
func (s *partition) evict(wm int64) {
	for s.queue.len() > 0 {
		q := s.queue.front()
		if !passed(q.due, s.settle, wm) {
			break
		}
		m := s.msgs.get(q.sender, q.msg)
		if m != nil {
			exp := s.expected(m)
			if int64(m.recv) >= exp || passed(q.due, s.window, wm) {
				s.finalize(m, exp)
			} else {
				s.late.push(*q)
			}
		}
		s.queue.pop()
	}
	for s.late.len() > 0 {
		q := s.late.front()
		if !passed(q.due, s.window, wm) {
			break
		}
		if m := s.msgs.get(q.sender, q.msg); m != nil {
			s.finalize(m, s.expected(m))
		}
		s.late.pop()
	}
	for s.pqueue.len() > 0 {
		q := s.pqueue.front()
		if !passed(q.due, s.window, wm) {
			break
		}
		k := [2]uint64{q.sender, q.msg}
		if p := s.pending[k]; p != nil {
			delete(s.pending, k)
			a := s.step(p.step)
			a.orphans += int64(len(p.times))
			for _, t := range p.times {
				s.seen(a, t)
			}
		}
		s.pqueue.pop()
	}
}

// passed reports t+d <= wm without overflow; wm is math.MinInt64 before any
// input was read and math.MaxInt64 at the end.
func passed(t, d, wm int64) bool {
	switch wm {
	case math.MaxInt64:
		return true
	case math.MinInt64:
		return false
	}
	return t <= wm-d
}

func insertSorted(s []int64, v int64) []int64 {
	s = append(s, v)
	i := len(s) - 1
	for i > 0 && s[i-1] > v {
		s[i] = s[i-1]
		i--
	}
	s[i] = v
	return s
}
