//go:build linux

package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

type pollAnswer struct {
	Room       string           `json:"room"`
	Epoch      string           `json:"epoch"`
	Seq        uint64           `json:"seq"`
	Messages   []map[string]any `json:"messages"`
	HistoryGap map[string]any   `json:"history_gap"`
}

func poll(t *testing.T, base, room, query string) (pollAnswer, int) {
	t.Helper()
	resp, err := http.Get("http://" + base + "/rooms/" + room + "/messages" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a pollAnswer
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			t.Fatal(err)
		}
	}
	return a, resp.StatusCode
}

func post(t *testing.T, base, room string, body any, header http.Header) (int, map[string]any) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	default:
		b, _ = json.Marshal(v)
	}
	req, _ := http.NewRequest("POST", "http://"+base+"/rooms/"+room+"/messages", bytes.NewReader(b))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

func TestPollingAndWebSocketSeeTheSameMessagesInOrder(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RateLimit, c.RateBurst = 1000, 1000 })
	wsc := connect(t, ts, "mixed")
	for i := range 10 {
		if i%2 == 0 {
			wsc.sendJSON(msg(fmt.Sprintf("ws-%d", i), "message_id", i))
		} else if code, m := post(t, ts.addr, "mixed", msg(fmt.Sprintf("http-%d", i), "message_id", i, "sender", "poller"), nil); code != 202 || m["message_id"] != float64(i) {
			t.Fatalf("post: %d %v", code, m)
		}
		wsc.next() // keeps the two senders in a known order
	}
	var wsTexts []string
	hist := dial(t, ts.url("/ws/mixed?since=0"))
	_, h := hist.joined()
	for _, m := range h {
		wsTexts = append(wsTexts, fmt.Sprint(m["seq"], m["text"]))
	}
	a, code := poll(t, ts.addr, "mixed", "?since=0")
	if code != 200 || a.Seq != 10 || len(a.Messages) != 10 {
		t.Fatalf("poll: %d %+v", code, a)
	}
	var pollTexts []string
	for _, m := range a.Messages {
		pollTexts = append(pollTexts, fmt.Sprint(m["seq"], m["text"]))
	}
	if strings.Join(pollTexts, ",") != strings.Join(wsTexts, ",") {
		t.Errorf("poll saw %v\nws saw %v", pollTexts, wsTexts)
	}
	if a2, _ := poll(t, ts.addr, "mixed", "?since=7"); len(a2.Messages) != 3 || a2.Messages[0]["seq"] != float64(8) {
		t.Errorf("since=7: %+v", a2)
	}
	st := ts.Stats()
	if st.HTTPMessagesIn != 5 || st.MessagesIn != 10 || st.Polls != 2 || st.HTTPDeliveries != 13 || st.HTTPBytesIn == 0 || st.HTTPBytesOut == 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestLongPollReturnsWhenAMessageArrives(t *testing.T) {
	ts := startServer(t, nil)
	a, _ := poll(t, ts.addr, "lp", "")
	type result struct {
		a    pollAnswer
		took time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		a, _ := poll(t, ts.addr, "lp", fmt.Sprintf("?since=%d&wait=20s", a.Seq))
		done <- result{a, time.Since(start)}
	}()
	testsupport.Eventually(t, 15*time.Second, "the poll to wait", func() bool { return ts.Stats().PollsWaiting == 1 })
	if code, _ := post(t, ts.addr, "lp", msg("wake up"), nil); code != 202 {
		t.Fatalf("post %d", code)
	}
	r := <-done
	if len(r.a.Messages) != 1 || r.a.Messages[0]["text"] != "wake up" || r.a.Seq != 1 {
		t.Errorf("got %+v", r.a)
	}
	if r.took > 5*time.Second {
		t.Errorf("the long poll took %v to see the message", r.took)
	}
	// With nothing new, a poll waits its full wait and returns empty.
	start = time.Now()
	a, code := poll(t, ts.addr, "lp", "?since=1&wait=300ms")
	if code != 200 || len(a.Messages) != 0 || a.Seq != 1 || time.Since(start) < 250*time.Millisecond {
		t.Errorf("empty poll: %d %+v after %v", code, a, time.Since(start))
	}
}

func TestPollRefusals(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxMessageSize = 100; c.RateLimit, c.RateBurst = 1, 2 })
	for _, tt := range []struct {
		body string
		code int
		err  string
	}{
		{`{"text":"` + strings.Repeat("x", 200) + `"}`, 413, "too_big"},
		{`{"text":`, 400, "invalid_json"},
		{`{"sender":"x"}`, 400, "invalid_message"},
		{`{"type":"join","room":"r"}`, 400, "invalid_message"},
		{`{"text":"x","room":"other"}`, 400, "invalid_message"},
	} {
		if code, m := post(t, ts.addr, "r", tt.body, nil); code != tt.code || m["code"] != tt.err {
			t.Errorf("%.30s: %d %v", tt.body, code, m)
		}
	}
	for i := range 3 {
		code, m := post(t, ts.addr, "r", msg("x"), nil)
		if want := map[bool]int{true: 202, false: 429}[i < 2]; code != want {
			t.Errorf("post %d: %d %v", i, code, m)
		}
	}
	if _, code := poll(t, ts.addr, "bad%20room", ""); code != 400 {
		t.Errorf("bad room: %d", code)
	}
	if _, code := poll(t, ts.addr, "r", "?wait=forever"); code != 400 {
		t.Errorf("bad wait: %d", code)
	}
	if st := ts.Stats(); st.Dropped["too_big"] != 1 || st.Dropped["invalid"] != 4 || st.Dropped["rate_limit"] != 1 {
		t.Errorf("dropped %v", st.Dropped)
	}
}

func TestPollAuth(t *testing.T) {
	ts := startAuthServer(t)
	if code, _ := post(t, ts.addr, "a", msg("x"), nil); code != 401 {
		t.Errorf("no token: %d", code)
	}
	tok := mint(t, "alice", []string{"a"}, time.Hour)
	if code, _ := post(t, ts.addr, "b", msg("x"), http.Header{"Authorization": {"Bearer " + tok}}); code != 403 {
		t.Errorf("room outside the token: %d", code)
	}
	if code, _ := post(t, ts.addr, "a", msg("x", "sender", "mallory"), http.Header{"Authorization": {"Bearer " + tok}}); code != 202 {
		t.Errorf("post: %d", code)
	}
	a, code := poll(t, ts.addr, "a", "?token="+tok)
	if code != 200 || len(a.Messages) != 1 || a.Messages[0]["sender"] != "alice" {
		t.Errorf("poll: %d %+v", code, a)
	}
}

func TestPollingAcrossNodes(t *testing.T) {
	redis := testsupport.StartRedis(t)
	nodes := startCluster(t, redis.URL(), 2, nil)
	first, _ := poll(t, nodes[1].addr, "far", "") // node 1 opens the room
	done := make(chan pollAnswer, 1)
	go func() {
		a, _ := poll(t, nodes[1].addr, "far", fmt.Sprintf("?since=%d&wait=20s", first.Seq))
		done <- a
	}()
	testsupport.Eventually(t, 15*time.Second, "the poll to wait", func() bool { return nodes[1].Stats().PollsWaiting == 1 })
	wsc := connect(t, nodes[0], "far")
	wsc.sendJSON(msg("from node 0"))
	wsc.next()
	if a := <-done; len(a.Messages) != 1 || a.Messages[0]["text"] != "from node 0" || a.Messages[0]["seq"] != float64(1) {
		t.Errorf("poll on node 1 got %+v", a)
	}
	if code, _ := post(t, nodes[1].addr, "far", msg("from a poller on node 1"), nil); code != 202 {
		t.Fatal(code)
	}
	if m := wsc.next(); m["text"] != "from a poller on node 1" || m["seq"] != float64(2) {
		t.Errorf("ws on node 0 got %v", m)
	}
}
