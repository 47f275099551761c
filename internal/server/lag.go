//go:build linux

package server

// lagMeter tells an event loop that it is behind what its sockets hold:
// past its capacity the bytes clients send wait in the kernel's buffers, a
// queue no counter of ours sees, and every message read from it is late by
// the time it waited there. A loop that refuses what it reads while it is
// behind (Config.MaxLoopLag) spends on each refusal a small answer instead
// of an order and its deliveries, and catches up: senders are told at once
// instead of every message queueing (docs/protocol.md, unavailable).
//
// The bound it measures: a pass that found fewer descriptors ready than the
// poller hands at once took every ready one (caught up); whatever it did
// not read came after it began. So what a pass reads waited at most from
// the start of the last pass that caught up to the end of the one before
// (the loop's time without looking at its sockets). The time the loop was
// parked in the poller, idle, is not counted: an idle loop is never behind.
//
// The loop is behind when the bound passed max at two passes' beginnings in
// a row: one long pass (a large room's broadcast, the thread descheduled
// once) is followed by a short one, and refuses nothing; a loop past its
// capacity passes it pass after pass.
type lagMeter struct {
	max      int64 // nanoseconds; 0: never behind
	caughtUp int64 // when the last pass that took every ready descriptor began
	lastEnd  int64 // when the last pass ended
	over     bool  // the bound passed max at the last pass's beginning
	behind   bool  // what this pass reads may have waited longer than max, as the last pass's did
}

// begin starts a pass at now (unix nanoseconds) whose poll returned every
// ready descriptor (all) or as many as it hands at once.
func (m *lagMeter) begin(now int64, all bool) {
	over := m.max > 0 && m.lastEnd-m.caughtUp > m.max
	m.behind, m.over = over && m.over, over
	if all || m.caughtUp == 0 { // the first pass: nothing waited for the loop before it began
		m.caughtUp = now
	}
}

// end ends the pass at now.
func (m *lagMeter) end(now int64) { m.lastEnd = now }
