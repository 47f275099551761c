// Package fivefield is a minimal chat server of the original five-field
// protocol ("Scaling a Basic Chat"), written as its authors wrote theirs: a
// goroutine per connection, the room from the URL (/ws/{room}), every text
// frame broadcast unchanged to the room, the sender included; no joined
// frame, no seq, no history. It is the lab's reference peer: the load
// tester's legacy protocol is tested against it, and `scalechat bench
// compare` ships an example that puts it beside scalechat serve.
package fivefield

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// Server is a five-field chat server. Its zero value is not usable: call New.
type Server struct {
	// Everyone makes every message go to every connection, whatever its
	// room (a server that ignores rooms).
	Everyone bool

	mu     sync.Mutex
	rooms  map[string]map[net.Conn]*sync.Mutex
	closes map[int]int // close code -> connections; 1006 for one dropped without a close frame
	conns  sync.WaitGroup
}

// New returns a server with no connection.
func New() *Server {
	return &Server{rooms: map[string]map[net.Conn]*sync.Mutex{}, closes: map[int]int{}}
}

// ServeHTTP upgrades the request and serves the connection until it ends.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	room, ok := strings.CutPrefix(r.URL.Path, "/ws/")
	if !ok || room == "" {
		http.Error(w, "want /ws/{room}", http.StatusNotFound)
		return
	}
	if s.Everyone {
		room = ""
	}
	conn, _, _, err := ws.UpgradeHTTP(r, w)
	if err != nil {
		return
	}
	s.conns.Add(1)
	defer s.conns.Done()
	s.serve(conn, room)
}

func (s *Server) serve(conn net.Conn, room string) {
	s.mu.Lock()
	if s.rooms[room] == nil {
		s.rooms[room] = map[net.Conn]*sync.Mutex{}
	}
	s.rooms[room][conn] = &sync.Mutex{}
	s.mu.Unlock()
	code := 1006
	defer func() {
		s.mu.Lock()
		delete(s.rooms[room], conn)
		s.closes[code]++
		s.mu.Unlock()
		conn.Close()
	}()
	for {
		msg, op, err := wsutil.ReadClientData(conn)
		if err != nil {
			var ce wsutil.ClosedError
			if errors.As(err, &ce) {
				code = int(ce.Code)
			}
			return
		}
		if op != ws.OpText {
			continue
		}
		s.broadcast(room, msg)
	}
}

// broadcast writes msg to every member of room. A member's mutex keeps its
// frames whole; the room lock keeps one order for every member.
func (s *Server) broadcast(room string, msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c, mu := range s.rooms[room] {
		mu.Lock()
		_ = wsutil.WriteServerText(c, msg)
		mu.Unlock()
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

// Close ends every connection and waits for their goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	for _, r := range s.rooms {
		for c := range r {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.conns.Wait()
}
