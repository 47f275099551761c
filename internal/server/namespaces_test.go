//go:build linux

package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/namespace"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// testNamespaces are the namespaces of the tests, as a file would give them.
func testNamespaces() namespace.Set {
	return namespace.Set{
		"quiet":  {Name: "quiet", History: 0, HistorySet: true},
		"short":  {Name: "short", History: 2, HistorySet: true},
		"anon":   {Name: "anon", NoPresence: true},
		"still":  {Name: "still", NoJoinLeave: true},
		"news":   {Name: "news", Publish: namespace.PublishBackend},
		"duo":    {Name: "duo", MaxMembers: 2},
		"plain":  {Name: "plain"},
		"sealed": {Name: "sealed", JoinToken: true},
	}
}

func withNamespaces(c *Config) {
	ns := testNamespaces()
	delete(ns, "sealed") // it needs a token: see TestNamespaceJoinToken
	c.Namespaces = ns
	c.RateLimit, c.RateBurst = 1000, 1000
}

// A room's history is its namespace's: none, 2, or the flag's 100.
func TestNamespaceHistory(t *testing.T) {
	ts := startServer(t, func(c *Config) { withNamespaces(c); c.APIKey = testAPIKey })
	for _, tc := range []struct {
		room string
		want int
	}{{"quiet:r", 0}, {"short:r", 2}, {"plain:r", 3}, {"lobby", 3}} {
		a := connect(t, ts, tc.room)
		for i := range 3 {
			a.sendJSON(msg(fmt.Sprintf("m%d", i)))
			a.next()
		}
		b := dial(t, ts.url("/ws/"+tc.room))
		if _, hist := b.joined(); len(hist) != tc.want {
			t.Errorf("%s: a joiner got %d messages of history, want %d", tc.room, len(hist), tc.want)
		}
		if a, code := poll(t, ts.addr, tc.room, "?since=0"); code != 200 || len(a.Messages) != tc.want {
			t.Errorf("%s: a poll answered %d with %d messages, want 200 with %d", tc.room, code, len(a.Messages), tc.want)
		}
	}
}

// Presence off: nobody counted, no events, the presence request refused;
// join/leave events off: no events, presence still answered.
func TestNamespacePresence(t *testing.T) {
	ts := startServer(t, func(c *Config) { withNamespaces(c); c.APIKey = testAPIKey })
	for _, tc := range []struct {
		room           string
		events         bool
		presence       bool
		presenceStatus int
	}{{"plain:p", true, true, 200}, {"anon:p", false, false, 409}, {"still:p", false, true, 200}} {
		t.Run(tc.room, func(t *testing.T) {
			ann := dial(t, ts.url("/ws/"+tc.room+"?name=ann&presence=1"))
			ann.joined()
			bob := dial(t, ts.url("/ws/"+tc.room+"?name=bob&presence=1"))
			bob.joined()
			bob.sendJSON(msg("hi"))
			// Bob's arrival is queued before his message, in the room's order.
			events := 0
			for m := ann.next(); m["type"] != nil; m = ann.next() {
				if m["type"] != "presence_join" {
					t.Fatalf("want presence_join or the chat message, got %v", m)
				}
				events++
			}
			if (events > 0) != tc.events {
				t.Errorf("%d presence events, want them %v", events, tc.events)
			}
			ann.sendJSON(map[string]any{"type": "presence", "room": tc.room})
			p := ann.next()
			switch {
			case tc.presence && (p["type"] != "presence" || p["members"] != float64(2)):
				t.Errorf("presence = %v, want 2 members", p)
			case !tc.presence && (p["type"] != "error" || p["code"] != codePresenceOff):
				t.Errorf("presence = %v, want the error %s", p, codePresenceOff)
			}
			if code, m := api(t, ts, "GET", "/api/rooms/"+tc.room+"/presence", ""); code != tc.presenceStatus {
				t.Errorf("API presence: %d %v, want %d", code, m, tc.presenceStatus)
			}
		})
	}
}

// Where only the backend publishes, a client's message gets the error
// frame backend_only (and a POST 403), the server API's is delivered.
func TestNamespaceBackendOnly(t *testing.T) {
	ts := startServer(t, func(c *Config) { withNamespaces(c); c.APIKey = testAPIKey })
	c := connect(t, ts, "news:today")
	c.sendJSON(msg("from a client", "message_id", 7))
	if e := c.next(); e["type"] != "error" || e["code"] != codeBackendOnly || e["message_id"] != float64(7) {
		t.Errorf("a client's message: %v, want the error %s for message 7", e, codeBackendOnly)
	}
	if code, m := post(t, ts.addr, "news:today", msg("posted"), nil); code != http.StatusForbidden || m["code"] != codeBackendOnly {
		t.Errorf("a POST: %d %v, want 403 %s", code, m, codeBackendOnly)
	}
	if code, m := api(t, ts, "POST", "/api/rooms/news:today/publish", `{"text":"from the backend","sender":"newsroom"}`); code != 200 || m["seq"] != float64(1) {
		t.Fatalf("the API's publish: %d %v, want seq 1", code, m)
	}
	if m := c.next(); m["text"] != "from the backend" || m["seq"] != float64(1) {
		t.Errorf("the member got %v, want the backend's message at seq 1", m)
	}
	st := ts.Stats()
	if st.Dropped["backend_only"] != 2 {
		t.Errorf("dropped %v, want backend_only 2 (the frame and the POST)", st.Dropped)
	}
}

// A join past max_members is refused: the URL's room with close 1008, a
// join frame with the error room_full; a member leaving makes room.
func TestNamespaceMaxMembers(t *testing.T) {
	ts := startServer(t, withNamespaces)
	a := connect(t, ts, "duo:r")
	connect(t, ts, "duo:r")
	third := dial(t, ts.url("/ws/duo:r"))
	if code := third.expectClose(); code != 1008 {
		t.Errorf("a third member by the URL: close %d, want 1008", code)
	}
	lobby := connect(t, ts, "lobby")
	lobby.sendJSON(map[string]any{"type": "join", "room": "duo:r"})
	if e := lobby.next(); e["type"] != "error" || e["code"] != codeRoomFull || !strings.Contains(e["message"].(string), "2 members") {
		t.Errorf("a third member by a join: %v, want the error %s", e, codeRoomFull)
	}
	a.sendJSON(map[string]any{"type": "leave", "room": "duo:r"})
	a.nextOfType("left")
	lobby.sendJSON(map[string]any{"type": "join", "room": "duo:r"})
	if j := lobby.next(); j["type"] != "joined" {
		t.Errorf("a join once a member left: %v, want joined", j)
	}
	if st := ts.Stats(); st.Dropped["room_full"] != 2 {
		t.Errorf("dropped %v, want room_full 2", st.Dropped)
	}
}

// A namespace with join_token admits only a token whose rooms claim names
// the room: by the URL (403 before the upgrade) and by a join frame.
func TestNamespaceJoinToken(t *testing.T) {
	v, err := auth.NewHS256(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *Config) { c.Auth, c.Namespaces = v, testNamespaces() })
	anyRoom := mint(t, "ann", nil, time.Hour)
	named := mint(t, "ann", []string{"lobby", "sealed:a"}, time.Hour)
	if _, err := tryDial(t, ts.url("/ws/sealed:a?token="+anyRoom), nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a token without rooms, by the URL: %v, want 403", err)
	}
	c := dial(t, ts.url("/ws/sealed:a?token="+named))
	if j, _ := c.joined(); j["room"] != "sealed:a" {
		t.Errorf("a token naming the room: %v, want joined", j)
	}
	open := dial(t, ts.url("/ws/lobby?token="+anyRoom))
	open.joined()
	open.sendJSON(map[string]any{"type": "join", "room": "sealed:a"})
	if e := open.next(); e["type"] != "error" || e["code"] != "forbidden" || !strings.Contains(e["message"].(string), "rooms claim") {
		t.Errorf("a token without rooms, by a join: %v, want forbidden", e)
	}
	if _, code := poll(t, ts.addr, "sealed:a", "?token="+anyRoom); code != http.StatusForbidden {
		t.Errorf("a poll with a token without rooms: %d, want 403", code)
	}
	if _, code := poll(t, ts.addr, "sealed:a", "?token="+named); code != 200 {
		t.Errorf("a poll with a token naming the room: %d, want 200", code)
	}
	st := ts.Stats()
	if st.Refused["forbidden"] != 2 || st.Dropped["forbidden"] != 1 {
		t.Errorf("refused %v, dropped %v; want forbidden 2 (the upgrade, the poll) and 1 (the join)", st.Refused, st.Dropped)
	}
}

// A room of a namespace the server does not know is refused at every
// entry: it must not fall back to looser rules.
func TestNamespaceUnknown(t *testing.T) {
	ts := startServer(t, func(c *Config) { withNamespaces(c); c.APIKey = testAPIKey })
	if _, err := tryDial(t, ts.url("/ws/nope:r"), nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("by the URL: %v, want 400", err)
	}
	c := connect(t, ts, "lobby")
	c.sendJSON(map[string]any{"type": "join", "room": "nope:r"})
	if e := c.next(); e["type"] != "error" || e["code"] != "invalid_room" || !strings.Contains(e["message"].(string), `namespace "nope" is not configured`) {
		t.Errorf("by a join: %v, want invalid_room", e)
	}
	if code, m := api(t, ts, "POST", "/api/rooms/nope:r/publish", `{"text":"x"}`); code != 400 || !strings.Contains(fmt.Sprint(m["message"]), "not configured") {
		t.Errorf("by the API: %d %v, want 400", code, m)
	}
	if code, m := post(t, ts.addr, "nope:r", msg("x"), nil); code != 400 || m["code"] != "invalid_room" {
		t.Errorf("by a POST: %d %v, want 400 invalid_room", code, m)
	}
}

// A namespace that needs tokens on a server that checks none is a
// configuration error, not a namespace nobody can join.
func TestNamespaceJoinTokenNeedsAuth(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Namespaces = testNamespaces()
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `namespace "sealed" needs a token naming its rooms (join_token), but the server checks no token`) {
		t.Errorf("Validate = %v", err)
	}
}

// In a cluster a room's history in Redis is its namespace's: a node that
// loads the room gets that many messages.
func TestNamespaceHistoryCluster(t *testing.T) {
	url := testsupport.StartRedis(t).URL()
	nodes := startCluster(t, url, 2, withNamespaces)
	for _, tc := range []struct {
		room string
		want int
	}{{"quiet:r", 0}, {"short:r", 2}, {"plain:r", 3}} {
		a, b := connect(t, nodes[0], tc.room), connect(t, nodes[1], tc.room) // shared: node 0, which loaded it first, orders it
		for i := range 3 {
			a.sendJSON(msg(fmt.Sprintf("m%d", i)))
			a.next()
			b.next()
		}
		// A third node loads the room from Redis alone.
		c := startServer(t, func(c *Config) { withNamespaces(c); c.Redis = url })
		if _, hist := dial(t, c.url("/ws/"+tc.room)).joined(); len(hist) != tc.want {
			t.Errorf("%s: a joiner on a new node got %d messages, want %d", tc.room, len(hist), tc.want)
		}
	}
}

// In a cluster max_members counts the connections other nodes report: a
// room with one member on each of two nodes is full on both.
func TestNamespaceMaxMembersCluster(t *testing.T) {
	nodes := startCluster(t, testsupport.StartRedis(t).URL(), 2, withNamespaces)
	connect(t, nodes[0], "duo:r")
	connect(t, nodes[1], "duo:r")
	testsupport.Eventually(t, 10*time.Second, "node 0 to see node 1's member", func() bool {
		members, _, _ := nodes[0].hub.Lookup([]byte("duo:r")).Presence()
		return members == 2
	})
	if code := dial(t, nodes[0].url("/ws/duo:r")).expectClose(); code != 1008 {
		t.Errorf("a third member on node 0: close %d, want 1008", code)
	}
}
