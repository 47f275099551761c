package client

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.5}
	tests := []struct {
		name    string
		b       Backoff
		attempt int
		r       float64
		want    time.Duration
	}{
		{"first, no jitter drawn", b, 1, 0, 100 * time.Millisecond},
		{"second doubles", b, 2, 0, 200 * time.Millisecond},
		{"fourth", b, 4, 0, 800 * time.Millisecond},
		{"capped at max", b, 5, 0, time.Second},
		{"huge attempt stays capped", b, 1000, 0, time.Second},
		{"jitter takes up to half", b, 2, 0.5, 150 * time.Millisecond},
		{"jitter on the cap", b, 9, 0.999, 500500 * time.Microsecond},
		{"attempt 0 is the first", b, 0, 0, 100 * time.Millisecond},
		{"defaults", Backoff{}, 1, 0, 250 * time.Millisecond},
		{"default max", Backoff{}, 30, 0, 10 * time.Second},
		{"default jitter is half", Backoff{}, 1, 1, 125 * time.Millisecond},
		{"negative jitter is none", Backoff{Initial: time.Second, Jitter: -1}, 1, 0.9, time.Second},
		{"max below initial", Backoff{Initial: time.Second, Max: time.Millisecond, Jitter: -1}, 3, 0, time.Second},
		{"multiplier below 1 takes the default", Backoff{Initial: time.Second, Multiplier: 0.5, Jitter: -1}, 2, 0, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Delay(tt.attempt, tt.r); got != tt.want {
				t.Errorf("Delay(%d, %v) = %v, want %v", tt.attempt, tt.r, got, tt.want)
			}
		})
	}
}

func TestBackoffGrowsAndStaysBounded(t *testing.T) {
	b := DefaultBackoff
	prev := time.Duration(0)
	for a := 1; a <= 64; a++ {
		lo, hi := b.Delay(a, 0.999999), b.Delay(a, 0)
		if hi > b.Max || lo < hi/2-time.Millisecond || hi < prev {
			t.Fatalf("attempt %d: delays [%v, %v] after %v", a, lo, hi, prev)
		}
		prev = hi
	}
}

func TestRoomURL(t *testing.T) {
	tests := []struct {
		base, room string
		since      uint64
		hasSince   bool
		epoch      string
		want       string
		err        string
	}{
		{"ws://127.0.0.1:8080/ws", "lobby", 0, false, "", "ws://127.0.0.1:8080/ws/lobby", ""},
		{"ws://127.0.0.1:8080/ws/", "r1", 0, false, "", "ws://127.0.0.1:8080/ws/r1", ""},
		{"ws://127.0.0.1:8080", "r1", 0, false, "", "ws://127.0.0.1:8080/ws/r1", ""},
		{"http://h:1/chat/ws", "a.b-c_d", 42, true, "", "ws://h:1/chat/ws/a.b-c_d?since=42", ""},
		{"https://h/ws", "x", 0, true, "", "wss://h/ws/x?since=0", ""},
		{"wss://h/ws?since=3&token=t", "x", 7, true, "", "wss://h/ws/x?since=7&token=t", ""},
		{"wss://h/ws?since=3", "x", 0, false, "", "wss://h/ws/x", ""},
		{"ws://h/ws", "x", 7, true, "k2m4q9x0abcd", "ws://h/ws/x?epoch=k2m4q9x0abcd&since=7", ""},
		{"ws://h/ws?epoch=old", "x", 0, false, "k2m4", "ws://h/ws/x", ""},
		{"ftp://h/ws", "x", 0, false, "", "", "want a ws://"},
		{"ws:///ws", "x", 0, false, "", "", "no host"},
		{"ws://h/%zz", "x", 0, false, "", "", "invalid URL escape"},
	}
	for _, tt := range tests {
		got, err := RoomURL(tt.base, tt.room, tt.since, tt.hasSince, tt.epoch)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("RoomURL(%q) error %v, want %q", tt.base, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("RoomURL(%q, %q, %d, %v) = %q, %v; want %q", tt.base, tt.room, tt.since, tt.hasSince, got, err, tt.want)
		}
	}
}

// newBare is a client with no connection, to feed frames to handle.
func newBare(sender string, rooms ...string) *Client {
	c := &Client{cfg: Config{Room: rooms[0], Sender: sender}, rooms: map[string]*roomState{}, pending: map[pendingKey]*pending{}}
	for _, r := range rooms {
		c.rooms[r] = &roomState{want: true}
	}
	return c
}

// summary is a short form of an event, for comparing sequences.
func summary(ev Event) string {
	switch e := ev.(type) {
	case nil:
		return "-"
	case *Message:
		own := ""
		if e.Own {
			own = " own"
		}
		return fmt.Sprintf("msg %s#%d %s%s", e.Room, e.Seq, e.Text, own)
	case *Joined:
		return fmt.Sprintf("joined %s seq=%d members=%d history=%d", e.Room, e.Seq, e.Members, e.History)
	case *HistoryGap:
		return fmt.Sprintf("gap %s since=%d first=%d reset=%v", e.Room, e.Since, e.FirstSeq, e.Reset)
	case *Left:
		return fmt.Sprintf("left %s seq=%d", e.Room, e.Seq)
	case *Presence:
		return fmt.Sprintf("presence %s %d %v anonymous=%d", e.Room, e.Members, e.Users, e.Anonymous)
	case *PresenceChange:
		return fmt.Sprintf("presence change %s %s joined=%v", e.Room, e.User, e.Joined)
	case *Error:
		return fmt.Sprintf("error %s %s id=%d room=%s", e.Code, e.Message, e.MessageID, e.Room)
	}
	return fmt.Sprintf("%T", ev)
}

func chat(room string, seq uint64, text string) string {
	return fmt.Sprintf(`{"room":%q,"seq":%d,"server_at":"2026-11-21T10:00:00.124031Z","text":%q,"sender":"bob","x":[1,{"members":"odd"}]}`, room, seq, text)
}

func TestHandle(t *testing.T) {
	tests := []struct {
		name    string
		frames  []string
		want    []string
		lastSeq uint64 // of room "a" afterwards
	}{
		{
			name:    "history then live",
			frames:  []string{`{"type":"joined","room":"a","seq":5,"members":2,"history":2}`, chat("a", 4, "four"), chat("a", 5, "five"), chat("a", 6, "six")},
			want:    []string{"joined a seq=5 members=2 history=2", "msg a#4 four", "msg a#5 five", "msg a#6 six"},
			lastSeq: 6,
		},
		{
			name:    "duplicates and older seqs are dropped",
			frames:  []string{`{"type":"joined","room":"a","seq":0,"members":1,"history":0}`, chat("a", 1, "x"), chat("a", 1, "x again"), chat("a", 2, "y"), chat("a", 1, "late")},
			want:    []string{"joined a seq=0 members=1 history=0", "msg a#1 x", "-", "msg a#2 y", "-"},
			lastSeq: 2,
		},
		{
			name:    "rooms are deduplicated apart",
			frames:  []string{chat("a", 3, "a3"), chat("b", 3, "b3"), chat("b", 2, "b2")},
			want:    []string{"msg a#3 a3", "msg b#3 b3", "-"},
			lastSeq: 3,
		},
		{
			name: "gap moves the floor to first_seq",
			frames: []string{chat("a", 2, "two"), `{"type":"joined","room":"a","seq":50,"members":1,"history":11}`,
				`{"type":"history_gap","room":"a","since":2,"first_seq":40}`, chat("a", 40, "forty")},
			want:    []string{"msg a#2 two", "joined a seq=50 members=1 history=11", "gap a since=2 first=40 reset=false", "msg a#40 forty"},
			lastSeq: 40,
		},
		{
			name: "reset room: seqs start again and are not dropped",
			frames: []string{chat("a", 9, "nine"), `{"type":"joined","room":"a","seq":1,"members":2,"history":1}`,
				`{"type":"history_gap","room":"a","since":9,"first_seq":1}`, chat("a", 1, "new one"), chat("a", 2, "new two")},
			want:    []string{"msg a#9 nine", "joined a seq=1 members=2 history=1", "gap a since=9 first=1 reset=true", "msg a#1 new one", "msg a#2 new two"},
			lastSeq: 2,
		},
		{
			name: "reset room without history",
			frames: []string{chat("a", 9, "nine"), `{"type":"joined","room":"a","seq":0,"members":1,"history":0}`,
				`{"type":"history_gap","room":"a","since":9,"first_seq":0}`, chat("a", 1, "new one")},
			want:    []string{"msg a#9 nine", "joined a seq=0 members=1 history=0", "gap a since=9 first=0 reset=true", "msg a#1 new one"},
			lastSeq: 1,
		},
		{
			name: "gap with history disabled skips to joined seq",
			frames: []string{chat("a", 5, "five"), `{"type":"joined","room":"a","seq":8,"members":1,"history":0}`,
				`{"type":"history_gap","room":"a","since":5,"first_seq":0}`, chat("a", 8, "stale"), chat("a", 9, "nine")},
			want:    []string{"msg a#5 five", "joined a seq=8 members=1 history=0", "gap a since=5 first=0 reset=false", "-", "msg a#9 nine"},
			lastSeq: 9,
		},
		{
			name: "server frames",
			frames: []string{`{"type":"presence","room":"a","members":12,"users":[{"user":"bob","connections":2}],"anonymous":10}`,
				`{"type":"presence_join","room":"a","user":"bob"}`, `{"type":"presence_leave","room":"a","user":"bob"}`,
				`{"type":"left","room":"a","seq":57}`,
				`{"type":"error","code":"rate_limited","message":"more than 20 messages per second","message_id":7,"room":"a"}`,
				`{"type":"error","code":"invalid_json","message":"not JSON"}`, `{"type":"from_the_future","room":"a"}`},
			want: []string{"presence a 12 [{bob 2}] anonymous=10", "presence change a bob joined=true", "presence change a bob joined=false", "left a seq=57", "error rate_limited more than 20 messages per second id=7 room=a",
				"error invalid_json not JSON id=0 room=", "-"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newBare("alice", "a", "b")
			var got []string
			for _, f := range tt.frames {
				ev, err := c.handle([]byte(f))
				if err != nil {
					t.Fatalf("handle(%s): %v", f, err)
				}
				got = append(got, summary(ev))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events\n got %q\nwant %q", got, tt.want)
			}
			if seq, _ := c.LastSeq("a"); seq != tt.lastSeq {
				t.Errorf("last seq of a = %d, want %d", seq, tt.lastSeq)
			}
		})
	}
}

func TestHandleBadFrames(t *testing.T) {
	for _, f := range []string{``, `nope`, `[1,2]`, `{"type":7}`, `{"room":"a","seq":"one","text":"x"}`, `{"type":"joined","room":"a","seq":-1}`} {
		c := newBare("alice", "a")
		if ev, err := c.handle([]byte(f)); err == nil {
			t.Errorf("handle(%q) = %s, want an error", f, summary(ev))
		}
	}
}

func TestHandleMatchesOwnEchoesAndRefusals(t *testing.T) {
	c := newBare("alice", "a")
	c.pending[pendingKey{"a", 1}] = &pending{}
	c.pending[pendingKey{"a", 2}] = &pending{}
	c.pending[pendingKey{"a", 3}] = &pending{}
	frames := []string{
		`{"room":"a","seq":1,"message_id":1,"sender":"bob","text":"same id, other sender"}`,
		`{"room":"a","seq":2,"message_id":1,"sender":"alice","text":"mine"}`,
		`{"type":"error","code":"rate_limited","message":"slow down","message_id":2,"room":"a"}`,
	}
	var got []string
	for _, f := range frames {
		ev, err := c.handle([]byte(f))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, summary(ev))
		c.confirm(ev)
	}
	want := []string{"msg a#1 same id, other sender", "msg a#2 mine own", "error rate_limited slow down id=2 room=a"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, ok := c.pending[pendingKey{"a", 3}]; !ok || len(c.pending) != 1 {
		t.Errorf("pending %v, want only message 3 left", c.pending)
	}
}

func TestConnError(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{websocket.CloseError{Code: 1001, Reason: "server shutting down"}, "server closed the connection: 1001 server shutting down"},
		{fmt.Errorf("read: %w", websocket.CloseError{Code: 1013}), "server closed the connection: 1013"},
		{fmt.Errorf("failed to read frame header: %w", io.EOF), "connection cut"},
		{errors.New("connection reset by peer"), "connection cut: connection reset by peer"},
	}
	for _, tt := range tests {
		err := connError(tt.err)
		if err.Error() != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("connError(%v) = %q, want %q", tt.err, err, tt.want)
		}
	}
}

func TestPresenceQuery(t *testing.T) {
	for _, tt := range []struct {
		name, in, sender string
		events           bool
		want             string
	}{
		{"nothing to add", "ws://h/ws/a?since=3", "", false, "ws://h/ws/a?since=3"},
		{"the sender names the client", "ws://h/ws/a", "zoë", false, "ws://h/ws/a?name=zo%C3%AB"},
		{"events asked", "ws://h/ws/a?since=3", "", true, "ws://h/ws/a?presence=1&since=3"},
		{"a name in the URL wins", "ws://h/ws/a?name=x", "alice", false, "ws://h/ws/a?name=x"},
		{"a display name the server would refuse is not sent", "ws://h/ws/a", strings.Repeat("n", 65), true, "ws://h/ws/a?presence=1"},
		{"nor one with control characters", "ws://h/ws/a", "a\tb", false, "ws://h/ws/a"},
	} {
		if got := presenceQuery(tt.in, tt.sender, tt.events); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
