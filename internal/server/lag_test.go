//go:build linux

package server

import (
	"testing"
	"time"
)

// Each pass: when it began and ended, and whether its poll took every
// ready descriptor; want: whether the pass was behind.
func TestLagMeter(t *testing.T) {
	type pass struct {
		begin, end int64
		all        bool
		behind     bool
	}
	const ms = int64(1e6)
	for _, tc := range []struct {
		name   string
		max    int64
		passes []pass
	}{
		{"short passes that catch up", 10 * ms, []pass{
			{0, 1 * ms, true, false}, {2 * ms, 3 * ms, true, false}, {3 * ms, 9 * ms, true, false}, {9 * ms, 10 * ms, true, false}}},
		{"idle time in the poller is not lag", 10 * ms, []pass{
			{0, 1 * ms, true, false}, {500 * ms, 501 * ms, true, false}, {900 * ms, 901 * ms, true, false}}},
		{"one long pass refuses nothing", 10 * ms, []pass{
			{0, 11 * ms, true, false}, {11 * ms, 12 * ms, true, false}, {12 * ms, 13 * ms, true, false}}},
		{"long passes in a row: behind from the second on, until one is short", 10 * ms, []pass{
			{0, 11 * ms, true, false}, {11 * ms, 22 * ms, true, false}, {22 * ms, 33 * ms, true, true},
			{33 * ms, 34 * ms, true, true}, {34 * ms, 35 * ms, true, false}}},
		{"full polls add up until they pass the bound", 10 * ms, []pass{
			{0, 4 * ms, false, false}, {4 * ms, 8 * ms, false, false}, {8 * ms, 12 * ms, false, false},
			{12 * ms, 16 * ms, false, false}, {16 * ms, 20 * ms, true, true}, {20 * ms, 21 * ms, true, false}}},
		{"exactly the bound is not behind", 10 * ms, []pass{
			{0, 10 * ms, true, false}, {10 * ms, 20 * ms, true, false}, {20 * ms, 21 * ms, true, false}}},
		{"off", 0, []pass{
			{0, 1000 * ms, false, false}, {1000 * ms, 2000 * ms, false, false}, {2000 * ms, 3000 * ms, false, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := lagMeter{max: tc.max}
			for i, p := range tc.passes {
				lag := m.lastEnd - m.caughtUp // the bound this pass judges by
				m.begin(p.begin+1, p.all)     // +1: a loop's first pass never begins at 0
				if m.behind != p.behind {
					t.Errorf("pass %d: behind %v, want %v (lag %d ms)", i, m.behind, p.behind, lag/ms)
				}
				m.end(p.end + 1)
			}
		})
	}
}

// A loop behind its sockets refuses what it reads: error unavailable, the
// message not delivered, counted as overloaded. A bound of 1 ns makes every
// pass after the first two behind (each takes longer).
func TestLoopBehindRefusesChat(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Loops, c.MaxLoopLag = 1, time.Nanosecond })
	c := connect(t, ts, "lag")
	refused := 0
	for i := range 20 {
		c.sendJSON(msg("m", "message_id", i))
		m := c.next()
		switch {
		case m["type"] == "error":
			if m["code"] != "unavailable" || m["message"] != behindMessage || m["message_id"] != float64(i) {
				t.Fatalf("refusal %v", m)
			}
			refused++
		case m["text"] != "m":
			t.Fatalf("got %v", m)
		}
	}
	if refused == 0 {
		t.Fatal("no message refused by a loop always behind")
	}
	if got := ts.Stats().Dropped["overloaded"]; got != uint64(refused) {
		t.Errorf("overloaded drops %d, want %d", got, refused)
	}
}
