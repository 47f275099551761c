// Package fivefield is the lab's stand-in for the original five-field chat
// server of "Scaling a Basic Chat" (github.com/MerzMax/scale-chat, src/),
// used where the real one cannot run: the tests of the load tester's and
// the audit's legacy protocol, and `scalechat bench five-field-server`.
//
// It models these facts of the original, each pinned by a test in
// fivefield_test.go (file names are the original's, under src/):
//
//   - server/main.go: the routes are /ws and /ws/{room} (gorilla/mux; the
//     room is one path segment, /ws has the room ""); any other path is 404.
//     The upgrader is gorilla/websocket's with no CheckOrigin, so its
//     default applies: a request whose Origin header names another host than
//     the request's Host is refused with 403 (no Origin is accepted), and no
//     subprotocol or compression is ever agreed.
//   - server/clientsManager.go, StartClient: a client's room is the room of
//     its URL, fixed for the connection; it is added to the list of clients
//     after the upgrade answer is written.
//   - server/client.go, HandleIncoming, and chat/message.go: every message
//     (text or binary) is decoded with encoding/json into exactly five fields,
//     message_id (uint64), text, sender, sent_at (time.Time: RFC 3339) and
//     room; a message that does not decode (not JSON, a field of the wrong
//     type, a sent_at that is not RFC 3339) is dropped and the connection
//     stays open. The sender waits while the incoming queue (100) is full.
//   - server/clientsManager.go, BroadcastMessages: one goroutine takes every
//     message of every room in the order they were queued and hands it to
//     every client whose URL room equals the message's own "room" field,
//     the sender included. A message without "room" has the room "": it
//     reaches only the clients of /ws, no client of a /ws/{room}. A client
//     whose outgoing queue (100 messages) is full silently misses the
//     message.
//   - server/client.go, HandleOutgoing: each message is encoded again from
//     the five fields (json.Marshal: in that order, sent_at as RFC 3339 with
//     nanoseconds and no trailing zeros, a missing field as its zero value),
//     so any other field is dropped; it is written as one text frame.
//
// Not modelled: the original's list of clients is read and written without
// a lock (a data race); and its writer ends only when a write fails, so a
// client that left stays in the list until a message for its room comes.
// Here a client leaves the list when its connection ends.
//
// Everyone is not the original's behaviour: it makes a server that ignores
// rooms, for the tests of what the lab does with one.
package fivefield

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// queueSize is the original's messageBufferSize: the capacity of the
// incoming queue and of each client's outgoing queue.
const queueSize = 100

// message is the original's chat.Message: the only fields that survive the
// server.
type message struct {
	MessageID uint64    `json:"message_id"`
	Text      string    `json:"text"`
	Sender    string    `json:"sender"`
	SentAt    time.Time `json:"sent_at"`
	Room      string    `json:"room"`
}

// Reencode does to data what the original server does to every message
// before it sends it on: decode it into the five fields and encode them
// again. An error means the server drops the message.
func Reencode(data []byte) ([]byte, error) {
	var m message
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("fivefield: the server drops this message: %w", err)
	}
	return json.Marshal(&m)
}

// Server is a five-field chat server. Its zero value is not usable: call New.
type Server struct {
	// Everyone makes every message go to every connection, whatever its
	// room (a server that ignores rooms; not the original's behaviour).
	// Set it before the first connection.
	Everyone bool

	incoming chan *message
	quit     chan struct{} // closed by Close: the broadcaster and blocked readers stop
	done     chan struct{} // closed when the broadcaster has returned

	mu          sync.Mutex
	clients     []*client
	closes      map[int]int // close code -> connections; 1006 for one dropped without a close frame
	skipped     int         // deliveries missed because a client's queue was full
	undecodable int         // messages dropped because they did not decode
	closed      bool
	conns       sync.WaitGroup
}

// client is one connection: its URL room and its outgoing queue, which its
// writer goroutine empties.
type client struct {
	conn net.Conn
	room string
	out  chan []byte
}

// New returns a server with no connection, its broadcaster running until
// Close.
func New() *Server {
	s := &Server{
		incoming: make(chan *message, queueSize),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		closes:   map[int]int{},
	}
	go s.broadcast()
	return s
}

// ServeHTTP upgrades a request for /ws or /ws/{room} and serves the
// connection until it ends.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	room, ok := routeRoom(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if isUpgrade(r) && !sameOrigin(r) {
		// gorilla/websocket's Upgrader.returnError.
		w.Header().Set("Sec-Websocket-Version", "13")
		http.Error(w, http.StatusText(http.StatusForbidden), http.StatusForbidden)
		return
	}
	conn, _, _, err := ws.UpgradeHTTP(r, w)
	if err != nil {
		return // UpgradeHTTP has answered
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	c := &client{conn: conn, room: room, out: make(chan []byte, queueSize)}
	s.clients = append(s.clients, c)
	s.conns.Add(1)
	s.mu.Unlock()
	defer s.conns.Done()
	s.serve(c)
}

// routeRoom returns the room of a path the original routes: "" for /ws,
// ROOM for /ws/ROOM (one segment).
func routeRoom(path string) (string, bool) {
	if path == "/ws" {
		return "", true
	}
	room, ok := strings.CutPrefix(path, "/ws/")
	if !ok || room == "" || strings.Contains(room, "/") {
		return "", false
	}
	return room, true
}

// isUpgrade reports whether r passes the checks gorilla/websocket makes
// before the origin's (Connection, Upgrade, method, version); one that
// does not is answered by the upgrade itself.
func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet &&
		hasToken(r.Header, "Connection", "upgrade") &&
		hasToken(r.Header, "Upgrade", "websocket") &&
		hasToken(r.Header, "Sec-Websocket-Version", "13")
}

func hasToken(h http.Header, name, token string) bool {
	for _, v := range h[http.CanonicalHeaderKey(name)] {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// sameOrigin is gorilla/websocket's checkSameOrigin, the default
// CheckOrigin: no Origin header, or one whose host equals the request's
// Host (ASCII case folded).
func sameOrigin(r *http.Request) bool {
	origin := r.Header["Origin"]
	if len(origin) == 0 {
		return true
	}
	u, err := url.Parse(origin[0])
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// serve reads c's messages until its connection ends, then takes it off the
// list and waits for its writer.
func (s *Server) serve(c *client) {
	var writer sync.WaitGroup
	writer.Go(func() { s.write(c) })
	code := s.read(c)
	s.mu.Lock()
	for i, x := range s.clients {
		if x == c {
			s.clients = append(s.clients[:i], s.clients[i+1:]...)
			break
		}
	}
	close(c.out) // under mu: the broadcaster sends under mu only to listed clients
	s.closes[code]++
	s.mu.Unlock()
	c.conn.Close()
	writer.Wait()
}

// read decodes c's messages into the incoming queue until the connection
// ends, and returns its close code (1006: none).
func (s *Server) read(c *client) int {
	for {
		// Control frames (ping, close) are answered inside, each in one
		// write, as the writer writes each frame: frames never interleave.
		data, _, err := wsutil.ReadClientData(c.conn)
		if err != nil {
			if ce, ok := errors.AsType[wsutil.ClosedError](err); ok {
				return int(ce.Code)
			}
			return 1006
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			s.mu.Lock()
			s.undecodable++
			s.mu.Unlock()
			continue
		}
		select {
		case s.incoming <- &m:
		case <-s.quit:
			return 1006
		}
	}
}

// write sends c's queued frames until the queue is closed; after a failed
// write it only drains the queue, as the original's writer stops writing.
func (s *Server) write(c *client) {
	failed := false
	for frame := range c.out {
		if failed {
			continue
		}
		if _, err := c.conn.Write(frame); err != nil {
			failed = true
		}
	}
}

// broadcast is the one goroutine that hands every message to the clients
// of its room (BroadcastMessages).
func (s *Server) broadcast() {
	defer close(s.done)
	for {
		select {
		case m := <-s.incoming:
			s.route(m)
		case <-s.quit:
			return
		}
	}
}

// route encodes m again and queues it for every client of m.Room, skipping
// those whose queue is full.
func (s *Server) route(m *message) {
	data, err := json.Marshal(m)
	if err != nil {
		return // the original's writer skips what does not encode; five plain fields always do
	}
	frame := ws.MustCompileFrame(ws.NewTextFrame(data))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.clients {
		if !s.Everyone && c.room != m.Room {
			continue
		}
		select {
		case c.out <- frame:
		default:
			s.skipped++
		}
	}
}

// CloseCodes returns how many connections ended with each close code
// (1006: without a close frame).
func (s *Server) CloseCodes() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.closes))
	for k, v := range s.closes {
		out[k] = v
	}
	return out
}

// Dropped returns how many messages did not decode and how many
// deliveries were skipped because a client's queue was full.
func (s *Server) Dropped() (undecodable, skipped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.undecodable, s.skipped
}

// Close ends every connection, waits for their goroutines, and stops the
// broadcaster. Connections upgraded later are closed at once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for _, c := range s.clients {
		c.conn.Close()
	}
	s.mu.Unlock()
	close(s.quit)
	s.conns.Wait()
	<-s.done
}
