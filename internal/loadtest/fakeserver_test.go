//go:build linux

package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/scalechat/scalechat/internal/protocol"
)

// fakeServer is a small goroutine-per-connection chat server speaking
// docs/protocol.md (joined, history, join, broadcast with seq), with
// failure injection: dropEvery drops every n-th delivery, refuseEvery
// answers every n-th message with an error frame unavailable instead of
// broadcasting it, delay holds every write back, and kickAt plays a
// server past its capacity: it refuses each connection's chat messages
// and closes the connection (1013 "overloaded") at its kickAt-th.
type fakeServer struct {
	URL         string
	history     int
	dropEvery   int64
	refuseEvery int64
	delay       time.Duration
	echo        bool
	kickAt      int

	mu         sync.Mutex
	rooms      map[string]*fakeRoom
	deliveries atomic.Int64
	messages   atomic.Int64
	conns      sync.WaitGroup
}

type fakeRoom struct {
	seq     uint64
	members map[*fakeConn]bool
	hist    [][]byte
}

type fakeConn struct {
	out   chan []byte
	rooms map[string]bool
}

func startFakeServer(t testing.TB, configure func(*fakeServer)) *fakeServer {
	t.Helper()
	s := &fakeServer{history: 100, rooms: map[string]*fakeRoom{}}
	if configure != nil {
		configure(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(s.handle)}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		s.conns.Wait()
	})
	s.URL = "ws://" + ln.Addr().String() + "/ws"
	return s
}

func (s *fakeServer) handle(w http.ResponseWriter, r *http.Request) {
	u := ws.HTTPUpgrader{Protocol: func(p string) bool { return p == protocol.Subprotocol }}
	c, _, _, err := u.Upgrade(r, w)
	if err != nil {
		return
	}
	s.conns.Add(1)
	defer s.conns.Done()
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fc := &fakeConn{out: make(chan []byte, 1<<16), rooms: map[string]bool{}}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for {
			select {
			case b := <-fc.out:
				if b == nil { // kicked, after what was queued before
					ws.WriteFrame(c, ws.NewCloseFrame(ws.NewCloseFrameBody(kickCode, kickReason)))
					return
				}
				if s.delay > 0 {
					time.Sleep(s.delay)
				}
				if wsutil.WriteServerMessage(c, ws.OpText, b) != nil {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel()
		<-writerDone
		s.mu.Lock()
		for room := range fc.rooms {
			delete(s.rooms[room].members, fc)
		}
		s.mu.Unlock()
	}()
	urlRoom := strings.TrimPrefix(r.URL.Path, "/ws/")
	if !s.echo {
		s.join(fc, urlRoom)
	}
	chats := 0
	for {
		b, _, err := wsutil.ReadClientData(c) // answers a close frame itself
		if err != nil {
			return
		}
		if s.echo {
			s.deliver(fc, b)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) != nil {
			continue
		}
		if m["type"] == "join" {
			room, _ := m["room"].(string)
			s.join(fc, room)
			continue
		}
		room, _ := m["room"].(string)
		if room == "" {
			room = urlRoom
		}
		chats++
		if s.kickAt > 0 && chats >= s.kickAt {
			fc.out <- nil
			awaitClose(c)
			return
		}
		if n := s.messages.Add(1); s.kickAt > 0 || s.refuseEvery > 0 && n%s.refuseEvery == 0 {
			e, _ := json.Marshal(map[string]any{"type": "error", "code": protocol.CodeUnavailable, "message_id": m["message_id"], "room": room})
			fc.out <- e
			continue
		}
		s.broadcast(room, m)
	}
}

// The close of a connection the fake server kicks.
const (
	kickCode   = ws.StatusCode(1013) // try again later
	kickReason = "overloaded"
)

// awaitClose reads the client's frames up to its close frame, the closing
// handshake's second half, after which the server closes TCP first (RFC
// 6455 section 7.1.1): the client then reads the close frame, not a reset.
func awaitClose(c net.Conn) {
	for {
		h, err := ws.ReadHeader(c)
		if err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, c, h.Length); err != nil || h.OpCode == ws.OpClose {
			return
		}
	}
}

func (s *fakeServer) join(fc *fakeConn, room string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.rooms[room]
	if rm == nil {
		rm = &fakeRoom{members: map[*fakeConn]bool{}}
		s.rooms[room] = rm
	}
	rm.members[fc] = true
	fc.rooms[room] = true
	j, _ := json.Marshal(map[string]any{"type": "joined", "room": room, "seq": rm.seq, "members": len(rm.members), "history": len(rm.hist)})
	fc.out <- j
	for _, h := range rm.hist {
		fc.out <- h
	}
}

func (s *fakeServer) broadcast(room string, m map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.rooms[room]
	if rm == nil {
		return
	}
	rm.seq++
	m["room"], m["seq"], m["server_at"] = room, rm.seq, time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(m)
	for fc := range rm.members {
		s.deliver(fc, b)
	}
	if s.history > 0 {
		rm.hist = append(rm.hist, b)
		if len(rm.hist) > s.history {
			rm.hist = rm.hist[1:]
		}
	}
}

func (s *fakeServer) deliver(fc *fakeConn, b []byte) {
	n := s.deliveries.Add(1)
	if s.dropEvery > 0 && n%s.dropEvery == 0 {
		return
	}
	select {
	case fc.out <- b:
	default: // a full queue drops, as a slow-consumer policy would
	}
}
