//go:build linux

package loadtest

import (
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// The frames in these tables are what socket.io 4.8.4 (deploy/socketio)
// sent and accepted, captured on the wire; the test against the real
// server below checks the adapter end to end.
func TestSocketIOEncode(t *testing.T) {
	p := &stepPlan{roomPre: "x-s1-r"}
	for _, tt := range []struct {
		ns, hello, join, msg string
	}{
		{"", "40", `422["join","x-s1-r3"]`,
			`42["chat",{"room":"x-s1-r3","message_id":"30064771079","due_us":1700000000000000,"text":"hi"}]`},
		{"/", "40", `422["join","x-s1-r3"]`,
			`42["chat",{"room":"x-s1-r3","message_id":"30064771079","due_us":1700000000000000,"text":"hi"}]`},
		{"chat", "40/chat,", `42/chat,2["join","x-s1-r3"]`,
			`42/chat,["chat",{"room":"x-s1-r3","message_id":"30064771079","due_us":1700000000000000,"text":"hi"}]`},
	} {
		w := newSocketIOWire(tt.ns)
		if got := string(w.appendHello(nil)); got != tt.hello {
			t.Errorf("ns %q hello %s, want %s", tt.ns, got, tt.hello)
		}
		if got := string(w.appendJoin(nil, p, 3, 2)); got != tt.join {
			t.Errorf("ns %q join %s, want %s", tt.ns, got, tt.join)
		}
		if got := string(w.appendMessage(nil, p, 3, 7, 7, 1700000000000000, "hi")); got != tt.msg {
			t.Errorf("ns %q message %s, want %s", tt.ns, got, tt.msg)
		}
	}
}

func TestSocketIOPath(t *testing.T) {
	for _, tt := range []struct{ url, path string }{
		{"ws://127.0.0.1:3000", "/socket.io/?EIO=4&transport=websocket"},
		{"ws://127.0.0.1:3000/", "/socket.io/?EIO=4&transport=websocket"},
		{"ws://127.0.0.1:3000/io/?token=a", "/io/?token=a&EIO=4&transport=websocket"},
	} {
		tg, err := parseTarget(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := (socketioWire{}).path(tg, nil, 0); got != tt.path {
			t.Errorf("%s: path %s, want %s", tt.url, got, tt.path)
		}
	}
}

func TestSocketIODecode(t *testing.T) {
	chat := `42["chat",{"room":"x-s1-r3","message_id":"30064771079","due_us":1700000000000000,"text":"hi"}]`
	for _, tt := range []struct {
		ns, frame string
		want      inbound
	}{
		{"", `0{"sid":"vUTpM2NFhskwUZBPAAAA","upgrades":[],"pingInterval":300,"pingTimeout":200,"maxPayload":1000000}`, inbound{kind: inOther}},
		{"", `2`, inbound{kind: inPing, text: []byte("3")}},
		{"", `2probe`, inbound{kind: inPing, text: []byte("3probe")}},
		{"", `3`, inbound{kind: inOther}},
		{"", `6`, inbound{kind: inOther}},
		{"", `40{"sid":"OueUJbRhE7xUtEDeAAAA"}`, inbound{kind: inHello}},
		{"chat", `40/chat,{"sid":"OueUJbRhE7xUtEDeAAAA"}`, inbound{kind: inHello}},
		{"chat", `40{"sid":"OueUJbRhE7xUtEDeAAAA"}`, inbound{kind: inOther}},
		{"", `432[]`, inbound{kind: inJoined, reqID: 2}},
		{"chat", `43/chat,17[]`, inbound{kind: inJoined, reqID: 17}},
		{"", `43[]`, inbound{kind: inInvalid}},
		{"", chat, inbound{kind: inMessage, room: []byte("x-s1-r3"), hasID: true, sender: 7, counter: 7, hasDue: true, due: 1700000000000000}},
		{"chat", strings.Replace(chat, "42", "42/chat,", 1), inbound{kind: inMessage, room: []byte("x-s1-r3"), hasID: true, sender: 7, counter: 7, hasDue: true, due: 1700000000000000}},
		{"", `42["chat","not an object"]`, inbound{kind: inMessage}},
		{"", `42["chat"]`, inbound{kind: inMessage}},
		{"", `42["presence",{"room":"x"}]`, inbound{kind: inOther}},
		{"", `42{"not":"an array"}`, inbound{kind: inInvalid}},
		{"", `44{"message":"Invalid namespace"}`, inbound{kind: inError, text: []byte(`{"message":"Invalid namespace"}`)}},
		{"", `41`, inbound{kind: inError, text: []byte(`1`)}},
		{"", `451-["chat",{"_placeholder":true,"num":0}]`, inbound{kind: inOther}},
		{"", `4`, inbound{kind: inInvalid}},
		{"", `47`, inbound{kind: inInvalid}},
		{"", ``, inbound{kind: inInvalid}},
		{"", `{"room":"x"}`, inbound{kind: inInvalid}},
	} {
		got := newSocketIOWire(tt.ns).decode([]byte(tt.frame), nil)
		if len(got) != 1 {
			t.Fatalf("%s: %d inbounds", tt.frame, len(got))
		}
		g := got[0]
		if g.kind != tt.want.kind || string(g.room) != string(tt.want.room) || g.hasID != tt.want.hasID || g.sender != tt.want.sender ||
			g.counter != tt.want.counter || g.hasDue != tt.want.hasDue || g.due != tt.want.due || g.reqID != tt.want.reqID ||
			string(g.text) != string(tt.want.text) {
			t.Errorf("ns %q %s: got %+v, want %+v", tt.ns, tt.frame, g, tt.want)
		}
	}
}

// The adapter against a real socket.io server (deploy/socketio/server.js,
// socket.io from its package-lock.json): every member of every room gets
// every message. The server pings every 200 ms and closes a connection
// whose pong is 1.5 s late, so a client that did not answer its pings would
// be cut 1.7 s in, during the run (a tighter timeout cut clients whose pong
// was merely late on a loaded CI machine under -race).
func TestSocketIOProtocolAgainstSocketIO(t *testing.T) {
	for _, ns := range []string{"", "/chat"} {
		t.Run("namespace "+ns, func(t *testing.T) {
			flags := []string{"--ping-interval", "200", "--ping-timeout", "1500"}
			if ns != "" {
				flags = append(flags, "--namespace", ns)
			}
			srv := testsupport.StartSocketIO(t, flags...)
			st := testStep("socketio", 3, 4)
			st.RoomsPerClient = 2
			st.Duration = Duration(1500 * 1e6)
			cfg := testConfig(t, srv.URL(), st)
			cfg.Protocol, cfg.Namespace = ProtocolSocketIO, ns
			res := runTest(t, cfg)
			s := res.Meta.Steps[0]
			if len(res.Failures) > 0 || s.Joined != 12 || s.Sent != 180 || s.Expected == 0 || s.Received != s.Expected ||
				s.Unexpected != 0 || s.Invalid != 0 || s.Disconnects != 0 || s.ConnectErrors != 0 {
				t.Fatalf("step %+v failures %v", s, res.Failures)
			}
			// Latency is counted from the due_us the server sent back.
			if s.LatencyMs.P50 <= 0 || s.LatencyMs.Max > 10000 { // a sane figure, not a target: a loaded CI machine saw 1 s
				t.Errorf("latency %+v", s.LatencyMs)
			}
			checkCSVAgainstMeta(t, readCSV(t, cfg.Out), readMeta(t, cfg.Out))
		})
	}
}

// A namespace the server does not have is refused with CONNECT_ERROR: every
// client fails at once with the server's words.
func TestSocketIOUnknownNamespace(t *testing.T) {
	srv := testsupport.StartSocketIO(t)
	cfg := testConfig(t, srv.URL(), testStep("socketio", 2, 2))
	cfg.Protocol, cfg.Namespace = ProtocolSocketIO, "nope"
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	if s.ConnectErrors != 4 || !strings.Contains(s.FirstError, "Invalid namespace") || len(res.Failures) == 0 {
		t.Fatalf("step %+v failures %v", s, res.Failures)
	}
}
