//go:build linux

package server

import (
	"bufio"
	"bytes"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// viewFields is a view without the parser's backing store, to compare.
func viewFields(v upgradeView) upgradeView {
	v.lists = [4]string{}
	v.remoteAddr = ""
	return v
}

// agreeWithNetHTTP checks that a head parse took reads as net/http reads
// it: net/http accepts it, with one Host, and every field the upgrade
// reads is the same.
func agreeWithNetHTTP(t *testing.T, head string, got *upgradeView) {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
	if err != nil {
		t.Fatalf("parse took %q, net/http refuses it: %v", head, err)
	}
	if n := hostLines(head); n != 1 { // net/http's server refuses none or two
		t.Fatalf("parse took %q with %d Host lines", head, n)
	}
	want := viewOfRequest(r)
	if !reflect.DeepEqual(viewFields(*got), viewFields(want)) {
		t.Fatalf("head %q:\nparse    %+v\nnet/http %+v", head, viewFields(*got), viewFields(want))
	}
}

// hostLines counts a head's Host lines (ReadRequest keeps the first only).
func hostLines(head string) int {
	n := 0
	for line := range strings.Lines(head) {
		if name, _, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "host") {
			n++
		}
	}
	return n
}

func TestParseHead(t *testing.T) {
	good := upgradeHead("/ws/room?since=3&name=al&token=t1")
	replace := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	for _, tt := range []struct {
		name string
		head string
		ok   bool
	}{
		{"plain", good, true},
		{"echo", upgradeHead("/echo"), true},
		{"names in any case", strings.ToLower(good[:4]) + good[4:], false}, // the method is case-sensitive
		{"lower-case names", replace("Upgrade: websocket\r\nConnection: Upgrade", "upgrade: websocket\r\nCONNECTION: Upgrade"), true},
		{"repeated Connection tokens", replace("Connection: Upgrade", "Connection: keep-alive, Upgrade ,close"), true},
		{"spaces and tabs around values", replace("Host: x", "Host: \t x \t"), true},
		{"tab inside a value", replace("Connection: Upgrade", "Connection: keep-alive,\tUpgrade"), true},
		{"no space after the colon", replace("Host: x", "Host:x"), true},
		{"other headers", replace("Host: x\r\n", "Host: x\r\nUser-Agent: a/1 (b; c)\r\nCookie: a=b; c=d\r\n"), true},
		{"escaped room", upgradeHead("/ws/a%2Eb"), true},
		{"origin, auth, extensions", replace("Host: x\r\n", "Host: x:80\r\nOrigin: http://x:80\r\nAuthorization: Bearer abc\r\n"+
			"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"), true},
		{"query with escapes", upgradeHead("/ws/a?name=a%20b&token=x+y"), true},
		{"query with ;", upgradeHead("/ws/a?name=a;b&token=t"), true},
		{"empty query", upgradeHead("/ws/a?"), true},

		{"obs-fold", replace("Connection: Upgrade\r\n", "Connection: keep-alive,\r\n Upgrade\r\n"), false},
		{"duplicate Host", replace("Host: x\r\n", "Host: x\r\nHost: y\r\n"), false},
		{"no Host", replace("Host: x\r\n", ""), false},
		{"empty Host", replace("Host: x", "Host: "), false},
		{"Host with odd bytes", replace("Host: x", "Host: x/y"), false},
		{"duplicate Sec-WebSocket-Key", replace("Host: x\r\n", "Host: x\r\nSec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\n"), false},
		{"second Connection line", replace("Host: x\r\n", "Host: x\r\nConnection: keep-alive\r\n"), false},
		{"HTTP/1.0", replace("HTTP/1.1", "HTTP/1.0"), false},
		{"absolute-form", replace("GET /ws/room", "GET http://x/ws/room"), false},
		{"body", replace("Host: x\r\n", "Host: x\r\nContent-Length: 3\r\n"), false},
		{"zero Content-Length", replace("Host: x\r\n", "Host: x\r\nContent-Length: 0\r\n"), false},
		{"chunked", replace("Host: x\r\n", "Host: x\r\nTransfer-Encoding: chunked\r\n"), false},
		{"Expect", replace("Host: x\r\n", "Host: x\r\nExpect: 100-continue\r\n"), false},
		{"control byte in a value", replace("Host: x\r\n", "Host: x\r\nX-A: a\x01b\r\n"), false},
		{"obs-text in a value", replace("Host: x\r\n", "Host: x\r\nX-A: caf\xc3\xa9\r\n"), false},
		{"space before the colon", replace("Host: x", "Host : x"), false},
		{"bad name byte", replace("Host: x\r\n", "Host: x\r\nX(A): 1\r\n"), false},
		{"bare LF", strings.ReplaceAll(good, "\r\n", "\n"), false},
		{"bare LF in one line", replace("Host: x\r\n", "Host: x\n"), false},
		{"two spaces in the request line", replace("GET /ws", "GET  /ws"), false},
		{"fragment", replace("?since=3", "#f?since=3"), false},
		{"bad escape", upgradeHead("/ws/a%zz"), false},
		{"space in the query", replace("since=3", "since=3 4"), false},
		{"bytes after the blank line", good + "x", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var v upgradeView
			if ok := v.parse([]byte(tt.head)); ok != tt.ok {
				t.Fatalf("parse(%q) = %v, want %v", tt.head, ok, tt.ok)
			}
			if tt.ok {
				agreeWithNetHTTP(t, tt.head, &v)
			}
		})
	}
}

// The fields of a plain head, one by one.
func TestParseHeadFields(t *testing.T) {
	head := "GET /ws/a%2Eb?since=7&since=8&name=al&presence=1&epoch=e1&token=t HTTP/1.1\r\nhost: h:1\r\n" +
		"upgrade: WebSocket\r\nconnection: keep-alive, Upgrade\r\nSec-Websocket-Key: k\r\nsec-websocket-version: 13\r\n" +
		"sec-websocket-protocol: a, b\r\nSec-WebSocket-Extensions: x\r\nORIGIN: http://h:1\r\nauthorization: Bearer z\r\n\r\n"
	var v upgradeView
	if !v.parse([]byte(head)) {
		t.Fatal("parse refused a plain head")
	}
	want := upgradeView{
		method: "GET", host: "h:1", path: "/ws/a.b", escapedPath: "/ws/a%2Eb",
		query:      upgradeQuery{since: "7", epoch: "e1", name: "al", presence: "1", token: "t"},
		connection: []string{"keep-alive, Upgrade"}, upgrade: []string{"WebSocket"},
		extensions: []string{"x"}, protocols: []string{"a, b"},
		version: "13", key: "k", authorization: "Bearer z", origin: "http://h:1",
	}
	if !reflect.DeepEqual(viewFields(v), want) {
		t.Errorf("parse:\n got %+v\nwant %+v", viewFields(v), want)
	}
}

func TestQueryOf(t *testing.T) {
	for _, raw := range []string{
		"", "since=1", "since=1&since=2", "since=&since=2", "name=a%20b", "name=a+b", "name=a;b&token=t",
		"token=%zz&token=ok", "&&since=4&", "since", "epoch=e&name=n&presence=true&token=x&other=y",
		strings.Repeat("a=1&", 100) + "since=5",
	} {
		q := url.Values{}
		if u, err := url.Parse("/?" + raw); err == nil {
			q = u.Query()
		}
		want := upgradeQuery{since: q.Get("since"), epoch: q.Get("epoch"), name: q.Get("name"), presence: q.Get("presence"), token: q.Get("token")}
		if got := queryOf(raw); got != want {
			t.Errorf("queryOf(%q) = %+v, want %+v", raw, got, want)
		}
	}
}

// FuzzParseHead: parse never panics, and a head it takes is one net/http
// accepts and reads the same fields of.
func FuzzParseHead(f *testing.F) {
	f.Add([]byte(upgradeHead("/ws/room?since=3&name=al")))
	f.Add([]byte(upgradeHead("/ws/a%2Eb?token=a+b%20c")))
	f.Add([]byte(strings.Replace(upgradeHead("/echo"), "Host: x", "Host: x\r\nOrigin: http://x", 1)))
	f.Add([]byte("GET /ws HTTP/1.1\r\nHost: [::1]:80\r\nConnection: a,\tUpgrade\r\n\r\n"))
	f.Fuzz(func(t *testing.T, head []byte) {
		var v upgradeView
		if !v.parse(head) {
			return
		}
		if !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
			t.Fatalf("parse took %q, which does not end its head", head)
		}
		agreeWithNetHTTP(t, string(head), &v)
	})
}

// An upgrade in a form the loop's parser does not take goes to net/http,
// which answers it as it always has: an upgrade it accepts switches
// (counted as accepted, not on a loop), one it refuses gets its refusal.
func TestUnusualHeadsGoToNetHTTP(t *testing.T) {
	good := upgradeHead("/ws/odd")
	for _, tt := range []struct {
		name   string
		head   string
		status int
	}{
		{"obs-fold", strings.Replace(good, "Connection: Upgrade\r\n", "Connection: keep-alive,\r\n Upgrade\r\n", 1), http.StatusSwitchingProtocols},
		{"second Connection line", strings.Replace(good, "Host: x\r\n", "Host: x\r\nConnection: keep-alive\r\n", 1), http.StatusSwitchingProtocols},
		{"bare LF", strings.ReplaceAll(good, "\r\n", "\n"), http.StatusSwitchingProtocols},
		{"Content-Length: 0", strings.Replace(good, "Host: x\r\n", "Host: x\r\nContent-Length: 0\r\n", 1), http.StatusSwitchingProtocols},
		{"duplicate Host", strings.Replace(good, "Host: x\r\n", "Host: x\r\nHost: y\r\n", 1), http.StatusBadRequest},
		{"control byte", strings.Replace(good, "Host: x\r\n", "Host: x\r\nX-A: a\x01b\r\n", 1), http.StatusBadRequest},
		{"Expect", strings.Replace(good, "Host: x\r\n", "Host: x\r\nExpect: nothing\r\n", 1), http.StatusExpectationFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var v upgradeView
			if v.parse([]byte(tt.head)) {
				t.Fatalf("the loop's parser takes %q", tt.head)
			}
			ts := startServer(t, nil)
			c := dialFrom(t, "127.0.0.1", ts.addr)
			if _, err := c.Write([]byte(tt.head)); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("answered %s, want %d", resp.Status, tt.status)
			}
			if st := ts.Stats(); st.AcceptedOnLoop != 0 {
				t.Errorf("%d accepted on a loop, want 0", st.AcceptedOnLoop)
			}
		})
	}
}
