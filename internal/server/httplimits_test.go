//go:build linux

package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// The hostile address of these tests; the well-behaved client uses
// 127.0.0.1, so that the per-address cap is the hostile one's alone.
const hostile = "127.0.0.2"

// dialFrom opens a TCP connection to addr from the loopback address src.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// floodResult is what one connection of a flood got: the status of its
// answer (0: none, the connection ended) and when.
type floodResult struct {
	status int
	after  time.Duration
}

// readAnswers reads one HTTP answer on each connection, each in its own
// goroutine, with a deadline; trickle, when set, runs beside each read
// until the answer comes.
func readAnswers(conns []net.Conn, trickle func(c net.Conn, stop <-chan struct{})) []floodResult {
	res := make([]floodResult, len(conns))
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			stop := make(chan struct{})
			if trickle != nil {
				wg.Go(func() { trickle(c, stop) })
			}
			defer close(stop)
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			res[i].after = time.Since(start)
			if err == nil {
				res[i].status = resp.StatusCode
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	return res
}

func countStatus(res []floodResult) map[int]int {
	m := map[int]int{}
	for _, r := range res {
		m[r.status]++
	}
	return m
}

// wellBehaved checks that a WebSocket client in a room and a normal long
// poll of the room still chat: the poll gets the member's message.
func wellBehaved(t *testing.T, ts *testServer) {
	t.Helper()
	member := connect(t, ts, "chat")
	// Counted before the poll starts: read after, it may already count
	// the poll, which then never waits "more" (the test hung so, once the
	// poll was quick enough).
	before := ts.Stats().PollsWaiting
	got := make(chan string, 1)
	go func() {
		code, body := httpGet(t, "http://"+ts.addr+"/rooms/chat/messages?since=0&wait=10s", nil)
		got <- fmt.Sprint(code, " ", body)
	}()
	testsupport.Eventually(t, 20*time.Second, "the poll to wait", func() bool { return ts.Stats().PollsWaiting > before })
	member.sendJSON(msg("still here"))
	if m := member.next(); m["text"] != "still here" {
		t.Fatalf("the member got %v", m)
	}
	select {
	case answer := <-got:
		if !strings.HasPrefix(answer, "200 ") || !strings.Contains(answer, `"still here"`) {
			t.Errorf("the poll got %s", answer)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poll got nothing")
	}
}

// 150 POSTs from one address that trickle their 200-byte bodies, against
// --max-connections-per-ip 100 and a 2 s body deadline: 50 are refused at
// once (429), the 100 others are cut at the deadline (408), both counted;
// meanwhile a client from another address chats.
func TestSlowBodiesCappedAndCut(t *testing.T) {
	const bodyTimeout = 2 * time.Second
	ts := startServer(t, func(c *Config) { c.MaxConnsPerIP = 100; c.MaxConnections = 500; c.BodyTimeout = bodyTimeout })
	conns := make([]net.Conn, 150)
	for i := range conns {
		conns[i] = dialFrom(t, hostile, ts.addr)
		if _, err := io.WriteString(conns[i], "POST /rooms/slow/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Eventually(t, 20*time.Second, "the connections over the cap to be refused", func() bool { return ts.Stats().Refused["per_ip"] == 50 })
	wellBehaved(t, ts)
	if st := ts.Stats(); st.HTTPConns < 100 || st.Refused["body_timeout"] != 0 {
		t.Fatalf("the flood is not held while the client chats: %d HTTP connections, %d cut (the test ran slower than the %s deadline)",
			st.HTTPConns, st.Refused["body_timeout"], bodyTimeout)
	}
	res := readAnswers(conns, func(c net.Conn, stop <-chan struct{}) {
		t := time.NewTicker(250 * time.Millisecond) // 1 byte each 250 ms: 50 s for the body
		defer t.Stop()
		for range 200 {
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := c.Write([]byte{' '}); err != nil {
					return
				}
			}
		}
	})
	if got := countStatus(res); got[http.StatusTooManyRequests] != 50 || got[http.StatusRequestTimeout] != 100 {
		t.Errorf("answers %v, want 50 × 429 and 100 × 408", got)
	}
	for _, r := range res {
		if r.status == http.StatusRequestTimeout && r.after > bodyTimeout+5*time.Second {
			t.Errorf("a slow body was cut after %s, the deadline is %s", r.after, bodyTimeout)
		}
	}
	st := ts.Stats()
	if st.Refused["per_ip"] != 50 || st.Refused["body_timeout"] != 100 || st.HTTPMessagesIn != 0 {
		t.Errorf("refused %v, HTTP messages in %d (none got through)", st.Refused, st.HTTPMessagesIn)
	}
	testsupport.Eventually(t, 20*time.Second, "the cut connections to be given back", func() bool { return ts.Stats().HTTPConns == 0 })
}

// 150 long polls of 150 rooms from one address against
// --max-connections-per-ip 100: 100 wait, holding 100 rooms; 50 are
// refused (429) and open none. When the 100 leave, their empty rooms are
// freed at once. Meanwhile a client from another address chats.
func TestLongPollFloodCapped(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConnsPerIP = 100; c.MaxConnections = 500 })
	conns := make([]net.Conn, 150)
	for i := range conns {
		conns[i] = dialFrom(t, hostile, ts.addr)
		if _, err := fmt.Fprintf(conns[i], "GET /rooms/p%d/messages?wait=60s HTTP/1.1\r\nHost: x\r\n\r\n", i); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Eventually(t, 20*time.Second, "100 polls waiting, 50 refused", func() bool {
		st := ts.Stats()
		return st.PollsWaiting == 100 && st.Refused["per_ip"] == 50
	})
	if n := ts.hub.Rooms(); n != 100 {
		t.Errorf("%d rooms held, want 100 (one per waiting poll)", n)
	}
	wellBehaved(t, ts)
	// The refused ones got 429 and were closed; read their answers
	// without waiting for the polls (which hold theirs for 60 s).
	var refused []net.Conn
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		b := make([]byte, 12)
		if _, err := io.ReadFull(c, b); err == nil && string(b[9:12]) == "429" {
			refused = append(refused, c)
		}
	}
	if len(refused) != 50 {
		t.Errorf("%d connections answered 429, want 50", len(refused))
	}
	if st := ts.Stats(); st.PollsWaiting != 100 {
		t.Errorf("%d polls waiting, want the 100 still", st.PollsWaiting)
	}
	for _, c := range conns {
		c.Close()
	}
	testsupport.Eventually(t, 20*time.Second, "the polls to end and their rooms to go", func() bool {
		st := ts.Stats()
		return st.PollsWaiting == 0 && st.HTTPConns == 0 && ts.hub.Rooms() == 1 // the member's room
	})
}

// The total cap counts HTTP connections too: with --max-connections 10,
// the 11th long poll from anywhere is refused with 503.
func TestLongPollsCountAgainstMaxConnections(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConnections = 10 })
	conns := make([]net.Conn, 12)
	for i := range conns {
		conns[i] = dialFrom(t, fmt.Sprintf("127.0.0.%d", 2+i%3), ts.addr)
		if _, err := fmt.Fprintf(conns[i], "GET /rooms/q/messages?wait=60s HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Eventually(t, 20*time.Second, "10 polls waiting, 2 refused", func() bool {
		st := ts.Stats()
		return st.PollsWaiting == 10 && st.Refused["max_connections"] == 2
	})
	if _, err := tryDial(t, ts.url("/ws/q"), nil); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("an upgrade with the server full of polls: %v, want 503", err)
	}
}

// net/http's own refusals are counted: a request line or headers over the
// maximum (431), headers not in within --handshake-timeout, and a body
// declared over --max-body-bytes (413).
func TestHeaderRefusalsCounted(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.HandshakeTimeout = 300 * time.Millisecond })
	big := dialFrom(t, hostile, ts.addr)
	fmt.Fprintf(big, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 40<<10))
	slow := dialFrom(t, hostile, ts.addr)
	io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n") // and never the blank line
	large := dialFrom(t, hostile, ts.addr)
	io.WriteString(large, "POST /rooms/a/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n")
	res := readAnswers([]net.Conn{big, slow, large}, nil)
	if res[0].status != http.StatusRequestHeaderFieldsTooLarge || res[1].status != 0 || res[2].status != http.StatusRequestEntityTooLarge {
		t.Errorf("answers %+v, want 431, none (closed), 413", res)
	}
	if res[1].after > 5*time.Second {
		t.Errorf("headers not sent were cut after %s, the timeout is 300ms", res[1].after)
	}
	st := ts.Stats()
	if st.Refused["header_too_large"] != 1 || st.Refused["handshake_timeout"] != 1 || st.Refused["body_too_large"] != 1 {
		t.Errorf("refused %v", st.Refused)
	}
	// A keep-alive connection that goes idle after its request is not a
	// handshake cut.
	idle := dialFrom(t, hostile, ts.addr)
	io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := readAnswers([]net.Conn{idle}, nil); r[0].status != http.StatusOK {
		t.Fatalf("healthz: %+v", r)
	}
	time.Sleep(600 * time.Millisecond) // two handshake timeouts: nothing may be counted
	if n := ts.Stats().Refused["handshake_timeout"]; n != 1 {
		t.Errorf("an idle keep-alive connection counted as a handshake cut: %d", n)
	}
}
