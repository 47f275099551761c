//go:build linux

package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/scalechat/scalechat/internal/protocol"
)

// smallBufferDial connects with a tiny receive buffer, so that a client
// that stops reading backs the server up quickly.
func smallBufferDial(t *testing.T, url string) *client {
	t.Helper()
	nd := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	d := gws.Dialer{Timeout: 5 * time.Second, NetDial: nd.DialContext, Protocols: []string{protocol.Subprotocol}}
	conn, r, _, err := d.Dial(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{t: t, conn: conn, r: r}
}

// readAll reads chat messages in the background until n arrived or the
// connection fails, and reports their seqs.
func readAll(c *client, n int) <-chan []float64 {
	out := make(chan []float64, 1)
	go func() {
		var seqs []float64
		for len(seqs) < n {
			f, err := c.readFrame(20 * time.Second)
			if err != nil {
				break
			}
			if f.Header.OpCode == gws.OpText && !strings.Contains(string(f.Payload), `"type"`) {
				var seq float64
				fmt.Sscanf(string(f.Payload[strings.Index(string(f.Payload), `"seq":`)+6:]), "%g", &seq)
				seqs = append(seqs, seq)
			}
		}
		out <- seqs
	}()
	return out
}

func TestSlowConsumerIsClosedAndOthersCarryOn(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.MaxQueue = 1 << 20
		c.RateLimit, c.RateBurst = 1e6, 1e6
		// The slow client reads its close frame only after the 16 MB went
		// through: on a busy machine that takes longer than the default
		// close timeout, after which the server rightly cuts the socket.
		c.CloseTimeout = time.Minute
	})
	slow := smallBufferDial(t, ts.url("/ws/s"))
	sender, fast := connect(t, ts, "s"), connect(t, ts, "s")
	const n, batch = 2000, 20
	text := strings.Repeat("x", 8<<10)
	fastGot := readAll(fast, n)
	// 16 MB in all, far more than the slow client's buffers and queue hold.
	// The sender paces itself on its own echoes, like a real client.
	for i := 0; i < n; i += batch {
		for range batch {
			sender.sendJSON(msg(text))
		}
		for j := range batch {
			if m := sender.next(); m["seq"] != float64(i+j+1) {
				t.Fatalf("sender: got seq %v, want %d", m["seq"], i+j+1)
			}
		}
	}
	seqs := <-fastGot
	if len(seqs) != n {
		t.Fatalf("fast client got %d of %d messages", len(seqs), n)
	}
	for i, s := range seqs {
		if s != float64(i+1) {
			t.Fatalf("fast client: message %d has seq %v", i, s)
		}
	}
	// The slow client finds what fitted in the buffers, then close 1013.
	if code := slow.expectClose(); code != 1013 {
		t.Errorf("slow consumer closed with %d, want 1013", code)
	}
	slow.finishClose()
	st := ts.Stats()
	if st.Dropped["slow_consumer"] != 1 || st.Disconnects[1013] != 1 {
		t.Errorf("dropped %v, disconnects %v", st.Dropped, st.Disconnects)
	}
}

func TestGracefulShutdownDeliversAcceptedMessagesThenCloses1001(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ShutdownTimeout = 3 * time.Second })
	sender := connect(t, ts, "g")
	others := []*client{connect(t, ts, "g"), connect(t, ts, "g")}
	sender.sendJSON(msg("last words"))
	sender.next() // accepted: the server has echoed it
	ts.cancel()
	for i, c := range others {
		if m := c.next(); m["text"] != "last words" {
			t.Errorf("client %d got %v", i, m)
		}
		if code := c.expectClose(); code != 1001 {
			t.Errorf("client %d: close %d, want 1001", i, code)
		}
		c.finishClose()
	}
	if code := sender.expectClose(); code != 1001 {
		t.Errorf("sender: close %d", code)
	}
	sender.finishClose()
	if !ts.wait(2 * time.Second) {
		t.Fatal("Serve did not return although every client closed")
	}
	if _, err := tryDial(t, ts.url("/ws/g"), nil); err == nil {
		t.Error("a new connection was accepted after shutdown")
	}
}

func TestShutdownGivesUpOnSilentClients(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ShutdownTimeout = 500 * time.Millisecond })
	c := connect(t, ts, "silent")
	start := time.Now()
	ts.cancel()
	if code := c.expectClose(); code != 1001 {
		t.Errorf("close %d", code)
	}
	// The client never answers; Serve must still return, near the timeout.
	if !ts.wait(10 * time.Second) {
		t.Fatal("Serve did not return")
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("Serve returned after %v, before the shutdown timeout", d)
	}
	if _, err := c.readFrame(5 * time.Second); !errors.Is(err, io.EOF) {
		t.Errorf("want EOF, got %v", err)
	}
}

func TestKeepalivePingsIdleAndClosesSilent(t *testing.T) {
	// The live client must answer within the pong timeout even on a loaded
	// machine: 2 s of slack, 100 ms between pings.
	ts := startServer(t, func(c *Config) { c.PingInterval, c.PongTimeout = 100*time.Millisecond, 2*time.Second })
	silent, live := connect(t, ts, "k"), connect(t, ts, "k")
	f, err := silent.readFrame(2 * time.Second)
	if err != nil || f.Header.OpCode != gws.OpPing {
		t.Fatalf("want a ping, got %v %v", f.Header.OpCode, err)
	}
	done := make(chan struct{})
	go func() { // live answers every ping, as browsers do
		defer close(done)
		for {
			f, err := live.readFrame(10 * time.Second)
			if err != nil || f.Header.OpCode == gws.OpText {
				return
			}
			if f.Header.OpCode == gws.OpPing {
				live.sendRaw(gws.NewPongFrame(f.Payload))
			}
		}
	}()
	if _, err := silent.readFrame(10 * time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("silent client: want EOF, got %v", err)
	}
	// live outlived the pong timeout; it still works.
	time.Sleep(2500 * time.Millisecond) // the thing under test is elapsed time itself
	other := connect(t, ts, "k")
	other.sendJSON(msg("still?"))
	<-done // live's reader returned on the text frame
	if st := ts.Stats(); st.Connections != 2 {
		t.Errorf("open connections %d, want 2", st.Connections)
	}
}

func TestTwoThousandClients(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 connections")
	}
	ts := startServer(t, func(c *Config) { c.History = 0 })
	const rooms, perRoom = 40, 50
	clients := make([]*client, 0, rooms*perRoom)
	for i := range rooms * perRoom {
		clients = append(clients, connect(t, ts, fmt.Sprintf("r%d", i%rooms)))
	}
	got := make([]<-chan []float64, len(clients))
	for i, c := range clients {
		got[i] = readAll(c, perRoom)
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.sendJSON(msg("hi")) })
	}
	wg.Wait()
	for i, ch := range got {
		seqs := <-ch
		if len(seqs) != perRoom {
			t.Fatalf("client %d got %d of %d messages", i, len(seqs), perRoom)
		}
		for j, s := range seqs {
			if s != float64(j+1) {
				t.Fatalf("client %d: message %d has seq %v", i, j, s)
			}
		}
	}
	st := ts.Stats()
	if st.Connections != rooms*perRoom || st.MessagesIn != rooms*perRoom || st.Deliveries != rooms*perRoom*perRoom || st.Rooms != rooms {
		t.Errorf("stats: %+v", st)
	}
}

func TestCountersAfterKnownTraffic(t *testing.T) {
	ts := startServer(t, nil)
	a, b := connect(t, ts, "count"), connect(t, ts, "count")
	for range 3 {
		a.sendJSON(msg("a"))
		b.sendJSON(msg("b"))
	}
	for range 6 {
		a.next()
		b.next()
	}
	st := ts.Stats()
	want := Stats{Connections: 2, Accepted: 2, Rooms: 1, HistoryEntries: 6, MessagesIn: 6, Deliveries: 12}
	if st.Connections != want.Connections || st.Accepted != want.Accepted || st.Rooms != want.Rooms ||
		st.HistoryEntries != want.HistoryEntries || st.MessagesIn != want.MessagesIn || st.Deliveries != want.Deliveries {
		t.Errorf("got %+v, want %+v", st, want)
	}
	if st.BytesIn == 0 || st.BytesOut <= st.BytesIn {
		t.Errorf("bytes in %d out %d", st.BytesIn, st.BytesOut)
	}
}

func TestEmptyRoomsAreFreed(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RoomGrace = 50 * time.Millisecond })
	for i := range 20 {
		c := connect(t, ts, fmt.Sprintf("tmp%d", i))
		c.sendJSON(msg("x"))
		c.next()
		c.sendRaw(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, "")))
		c.expectClose()
	}
	deadline := time.Now().Add(5 * time.Second)
	for ts.Stats().Rooms != 0 || ts.Stats().HistoryEntries != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("rooms still held: %+v", ts.Stats())
		}
		time.Sleep(10 * time.Millisecond) // polling a state with no signal to wait on
	}
}
