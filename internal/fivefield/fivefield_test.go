package fivefield

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Each test pins one fact the package doc lists, against a real WebSocket
// client on loopback. With SCALECHAT_FIVEFIELD_ADDR=host:port the tests that
// need no internals run against that server instead: the original, built
// by hand from its repository, to check the facts against it (docs/loadtest.md).

// start returns the server under test and its address; the server is nil
// when the tests run against SCALECHAT_FIVEFIELD_ADDR.
func start(t *testing.T) (*Server, string) {
	t.Helper()
	if addr := os.Getenv("SCALECHAT_FIVEFIELD_ADDR"); addr != "" {
		return nil, addr
	}
	s := New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s}
	var served sync.WaitGroup
	served.Go(func() { _ = srv.Serve(ln) })
	t.Cleanup(func() {
		srv.Close()
		s.Close()
		served.Wait()
	})
	return s, ln.Addr().String()
}

func dial(t *testing.T, addr, path string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+addr+path, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func send(t *testing.T, c *websocket.Conn, typ websocket.MessageType, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, typ, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

func next(t *testing.T, c *websocket.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	typ, data, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if typ != websocket.MessageText {
		t.Fatalf("a %v frame, want text: %s", typ, data)
	}
	return string(data)
}

// markers sends, after the message under test, one marker into each room
// by the room field. One broadcaster takes a connection's messages in
// order, so a client whose first frame is its marker did not get the
// message: no waiting for something not to come.
func markers(t *testing.T, c *websocket.Conn, rooms ...string) {
	for _, r := range rooms {
		send(t, c, websocket.MessageText, `{"text":"marker","room":"`+r+`"}`)
	}
}

func isMarker(frame string) bool { return strings.Contains(frame, `"text":"marker"`) }

// join dials paths one after another and waits until each is on the
// server's list: the server lists a client after answering its upgrade.
// Each sends a marker into its own room, which every client of that room
// dialled so far receives.
func join(t *testing.T, addr string, paths ...string) []*websocket.Conn {
	t.Helper()
	conns := make([]*websocket.Conn, len(paths))
	for i, p := range paths {
		conns[i] = dial(t, addr, p)
		markers(t, conns[i], roomOf(p))
		for j := range i + 1 {
			if roomOf(paths[j]) != roomOf(p) {
				continue
			}
			if f := next(t, conns[j]); !isMarker(f) {
				t.Fatalf("%s: %s before a marker", paths[j], f)
			}
		}
	}
	return conns
}

// roomOf is the room of a path: "" for /ws.
func roomOf(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, "/ws"), "/") }

// A message goes to the clients whose URL room is the message's "room",
// the sender included; a message without "room" has the room "": it
// reaches the clients of /ws only.
func TestRoutesByTheMessagesRoomField(t *testing.T) {
	_, addr := start(t)
	names := []string{"a", "a2", "b", "bare"}
	paths := []string{"/ws/a", "/ws/a", "/ws/b", "/ws"}
	for _, tt := range []struct {
		name string
		typ  websocket.MessageType
		msg  string
		want []string
	}{
		{"its own room", websocket.MessageText, `{"message_id":1,"text":"x","room":"a"}`, []string{"a", "a2"}},
		{"another room than the sender's URL", websocket.MessageText, `{"message_id":2,"text":"x","room":"b"}`, []string{"b"}},
		{"no room: nobody in a room", websocket.MessageText, `{"message_id":3,"text":"x"}`, []string{"bare"}},
		{"a room nobody is in", websocket.MessageText, `{"message_id":4,"text":"x","room":"c"}`, nil},
		{"binary, answered as text", websocket.MessageBinary, `{"message_id":5,"text":"x","room":"a"}`, []string{"a", "a2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conns := join(t, addr, paths...)
			send(t, conns[0], tt.typ, tt.msg)
			markers(t, conns[0], "a", "b", "")
			for i, c := range conns {
				name := names[i]
				want := false
				for _, w := range tt.want {
					want = want || w == name
				}
				f := next(t, c)
				got := !isMarker(f)
				if got != want {
					t.Errorf("%s (%s): got the message %v, want %v (first frame %s)", name, paths[i], got, want, f)
				}
				if got && !isMarker(next(t, c)) {
					t.Errorf("%s: no marker after the message", name)
				}
			}
		})
	}
}

// Every message is decoded into exactly five fields and encoded again:
// other fields are dropped, missing ones come back as zero values, the
// fields in the order of chat.Message, sent_at as RFC 3339 with nanoseconds.
func TestReencodesTheFiveFields(t *testing.T) {
	_, addr := start(t)
	c := dial(t, addr, "/ws/a")
	for _, tt := range []struct{ name, in, want string }{
		{"unknown fields dropped, order of the struct",
			`{"room":"a","due_us":5,"type":"x","sender":"s","message_id":7,"text":"hi","sent_at":"2026-01-02T03:04:05.123000Z"}`,
			`{"message_id":7,"text":"hi","sender":"s","sent_at":"2026-01-02T03:04:05.123Z","room":"a"}`},
		{"missing fields are zero",
			`{"room":"a"}`,
			`{"message_id":0,"text":"","sender":"","sent_at":"0001-01-01T00:00:00Z","room":"a"}`},
		{"the offset is kept, HTML escaped",
			`{"message_id":18446744073709551615,"text":"<b>","sender":"s","sent_at":"2026-01-02T03:04:05+02:00","room":"a"}`,
			`{"message_id":18446744073709551615,"text":"\u003cb\u003e","sender":"s","sent_at":"2026-01-02T03:04:05+02:00","room":"a"}`},
		{"a nested object is dropped",
			`{"message_id":1,"meta":{"due_us":5},"room":"a"}`,
			`{"message_id":1,"text":"","sender":"","sent_at":"0001-01-01T00:00:00Z","room":"a"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			send(t, c, websocket.MessageText, tt.in)
			if got := next(t, c); got != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
			if got, err := Reencode([]byte(tt.in)); err != nil || string(got) != tt.want {
				t.Errorf("Reencode: %s %v", got, err)
			}
		})
	}
}

// A message that does not decode is dropped; the connection stays open.
func TestDropsWhatDoesNotDecode(t *testing.T) {
	s, addr := start(t)
	c := dial(t, addr, "/ws/a")
	bad := []string{
		`not json`,
		`{"message_id":"7","room":"a"}`,
		`{"message_id":-1,"room":"a"}`,
		`{"message_id":1.5,"room":"a"}`,
		`{"sent_at":"2026-01-02 03:04:05","room":"a"}`,
		`{"room":5}`,
	}
	for _, msg := range bad {
		t.Run(msg, func(t *testing.T) {
			if _, err := Reencode([]byte(msg)); err == nil {
				t.Error("Reencode: no error")
			}
			send(t, c, websocket.MessageText, msg)
			markers(t, c, "a")
			if f := next(t, c); !isMarker(f) {
				t.Fatalf("got %s, want it dropped", f)
			}
		})
	}
	if s == nil {
		return
	}
	if n, _ := s.Dropped(); n != len(bad) {
		t.Errorf("undecodable: %d, want %d", n, len(bad))
	}
}

// Every member of a room gets the room's messages in one order, whoever
// sent them: one broadcaster queues every message.
func TestOneOrderForEveryMember(t *testing.T) {
	_, addr := start(t)
	readers := join(t, addr, "/ws/a", "/ws/a", "/ws/a", "/ws/a")
	senders := readers[2:]
	const n = 40
	var wg sync.WaitGroup
	for i, c := range senders {
		wg.Go(func() {
			for k := range n {
				msg, _ := json.Marshal(message{MessageID: uint64(k), Sender: string(rune('p' + i)), Room: "a"})
				if err := c.Write(context.Background(), websocket.MessageText, msg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var first []string
	for i, c := range readers {
		var seen []string
		for range 2 * n {
			seen = append(seen, next(t, c))
		}
		if i == 0 {
			first = seen
			continue
		}
		for k := range seen {
			if seen[k] != first[k] {
				t.Fatalf("reader %d: frame %d is %s, reader 0 had %s", i, k, seen[k], first[k])
			}
		}
	}
}

// A client whose outgoing queue holds 100 messages misses the next ones,
// and the broadcaster goes on: nothing waits for a slow client.
func TestFullQueueSkips(t *testing.T) {
	s := New()
	slow, peer := net.Pipe() // nobody writes the queue out
	defer peer.Close()
	stalled := &client{conn: slow, room: "a", out: make(chan []byte, queueSize)}
	other := &client{conn: slow, room: "b", out: make(chan []byte, queueSize)}
	s.mu.Lock()
	s.clients = append(s.clients, stalled, other)
	s.mu.Unlock()
	for range 150 {
		s.route(&message{Room: "a"})
	}
	s.route(&message{Room: "b"})
	if len(stalled.out) != 100 || len(other.out) != 1 {
		t.Errorf("queued %d and %d, want 100 and 1", len(stalled.out), len(other.out))
	}
	if _, skipped := s.Dropped(); skipped != 50 {
		t.Errorf("skipped %d, want 50", skipped)
	}
	s.Close()
}

// gorilla/websocket's default origin check: a browser's Origin must name
// the request's Host, else 403; no Origin is accepted. Paths other than
// /ws and /ws/{room} are 404.
func TestRefusals(t *testing.T) {
	_, addr := start(t)
	for _, tt := range []struct {
		name, path, origin string
		want               int
	}{
		{"no origin", "/ws/a", "", http.StatusSwitchingProtocols},
		{"same origin", "/ws/a", "http://" + addr, http.StatusSwitchingProtocols},
		{"same origin, other case and scheme", "/ws/a", "HTTPS://" + strings.ToUpper(addr), http.StatusSwitchingProtocols},
		{"bare /ws", "/ws", "", http.StatusSwitchingProtocols},
		{"foreign origin", "/ws/a", "http://evil.example", http.StatusForbidden},
		{"other port", "/ws/a", "http://127.0.0.1:1", http.StatusForbidden},
		{"unparsable origin", "/ws/a", "http://%zz", http.StatusForbidden},
		{"two segments", "/ws/a/b", "", http.StatusNotFound},
		{"empty room", "/ws/", "", http.StatusNotFound},
		{"another path", "/chat/a", "", http.StatusNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			c, resp, err := websocket.Dial(ctx, "ws://"+addr+tt.path, &websocket.DialOptions{HTTPHeader: h})
			if c != nil {
				c.CloseNow()
			}
			if resp == nil {
				t.Fatalf("no answer: %v", err)
			}
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d (%v)", resp.StatusCode, tt.want, err)
			}
		})
	}
}
