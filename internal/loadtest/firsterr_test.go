//go:build linux

package loadtest

import (
	"testing"

	"github.com/scalechat/scalechat/internal/ws"
)

// A step's first connection failure and its first error frame are kept
// apart: a server past its capacity refuses messages with error frames
// (each leaves its connection open) and drops clients, and the reason
// shown beside the drops must be why they were dropped.
func TestFirstErrorsKeptApart(t *testing.T) {
	const (
		refusal = `{"type":"error","code":"unavailable","message_id":1}`
		other   = `{"type":"error","code":"rate_limited","message_id":2}`
		reset   = "read: connection reset by peer"
	)
	type event struct {
		client int    // 0: a ready client; 1: another, joining when the case says
		frame  string // a text frame from the server, else the connection ends
		why    string // why it ended
	}
	tests := []struct {
		name         string
		joining      bool // client 1 waits for its joined frame
		events       []event
		conn, server string
		drops, fails int64
	}{
		{"a refusal, then its connection dropped", false,
			[]event{{0, refusal, ""}, {0, "", reset}}, reset, "server error: " + refusal, 1, 0},
		{"a refusal, then another connection dropped", false,
			[]event{{0, refusal, ""}, {1, "", reset}}, reset, "server error: " + refusal, 1, 0},
		{"a drop, then a refusal", false,
			[]event{{1, "", reset}, {0, refusal, ""}}, reset, "server error: " + refusal, 1, 0},
		{"refusals only", false,
			[]event{{0, refusal, ""}, {1, other, ""}}, "", "server error: " + refusal, 0, 0},
		{"the first drop stays", false,
			[]event{{0, "", reset}, {1, "", "write: broken pipe"}}, reset, "", 2, 0},
		{"a refused join fails its client", true,
			[]event{{0, other, ""}, {1, refusal, ""}}, "the server refused a join: " + refusal, "server error: " + other, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, st := newStillLoop(t, 2)
			if tt.joining {
				st.clients[1].state = csJoining
				st.inflight, st.unsettle = 1, 1
			}
			for _, e := range tt.events {
				c := st.clients[e.client]
				if e.frame != "" {
					l.onMessage(c, []byte(e.frame), l.clock.now())
				} else {
					l.lost(c, e.why)
				}
			}
			if st.first.conn != tt.conn || st.first.server != tt.server {
				t.Errorf("first connection error %q, first server error %q; want %q, %q", st.first.conn, st.first.server, tt.conn, tt.server)
			}
			if st.counts.Disconnects != tt.drops || st.counts.ConnectErrors != tt.fails {
				t.Errorf("%d disconnects, %d connect errors; want %d, %d", st.counts.Disconnects, st.counts.ConnectErrors, tt.drops, tt.fails)
			}
		})
	}
}

// newStillLoop returns a loop that does not run, in a step of n ready
// clients without sockets: the test plays their events on its own
// goroutine.
func newStillLoop(t *testing.T, n int) (*loop, *loopStep) {
	t.Helper()
	cfg := &Config{URL: "ws://127.0.0.1:1/ws", Protocol: ProtocolScalechat, Steps: []Step{{Name: "s", Rooms: 1, RoomSize: n, RoomsPerClient: 1}}}
	l := newTestLoop(t, cfg)
	st := &loopStep{plan: newStepPlan(cfg, 0, 0), name: "s", next: n}
	for range n {
		st.clients = append(st.clients, &client{fd: -1, src: -1, state: csReady, rooms: make([]membership, 1)})
	}
	l.st = st
	t.Cleanup(l.shutdown)
	return l, st
}

// The reason a server's close frame gives is part of why its connection
// ended.
func TestServerClosedSaysItsReason(t *testing.T) {
	for _, tt := range []struct {
		payload []byte
		want    string
	}{
		{ws.AppendClosePayload(nil, 1013, "overloaded"), `the server closed the connection with code 1013: "overloaded"`},
		{ws.AppendClosePayload(nil, 1001, ""), "the server closed the connection with code 1001"},
		{nil, "the server closed the connection with code 1005"},
	} {
		_, code, err := ws.CloseReply(tt.payload)
		if err != nil {
			t.Fatal(err)
		}
		if got := serverClosed(code, tt.payload); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.payload, got, tt.want)
		}
	}
}

// newTestLoop returns loop 0 of cfg, recording nothing; its recorder is
// closed when the test ends, after the cleanups the caller registers (they
// stop the loop).
func newTestLoop(t *testing.T, cfg *Config) *loop {
	t.Helper()
	tgt, err := parseTarget(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := CreateRecorder("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	l, err := newLoop(0, cfg, tgt, newClock(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
