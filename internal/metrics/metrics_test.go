//go:build linux

package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	gws "github.com/gobwas/ws"

	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestMetricsAfterKnownTraffic drives a known sequence of events through a
// real server and checks every scalechat_ series of /metrics exactly.
func TestMetricsAfterKnownTraffic(t *testing.T) {
	n := startNode(t, func(c *server.Config) {
		c.MaxConnections = 6
		c.RateLimit, c.RateBurst, c.RateAbuse = 1, 3, 10
		c.MaxMessageSize = 1024
	}, Options{})

	// Refused: bad room name, foreign origin (first: once the server is
	// full, HTTP requests are refused as full too, they count against
	// --max-connections).
	req, err := http.NewRequest("GET", "http://"+n.chatAddr+"/ws/bad!room", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // the connection does not stay open, holding one of the six
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad room: %s", resp.Status)
	}
	if _, err := dialWS(t, n.chatAddr, "a", http.Header{"Origin": {"http://evil.example"}}); err == nil {
		t.Fatal("a foreign origin was accepted")
	}
	testsupport.Eventually(t, 5*time.Second, "the refused connections to close", func() bool { return n.srv.Stats().HTTPConns == 0 })

	// Six connections, handed to the two loops in turn: a1 and a2 share
	// room a on different loops.
	a1, a2 := join(t, n.chatAddr, "a"), join(t, n.chatAddr, "a")
	b1 := join(t, n.chatAddr, "b")
	r1 := join(t, n.chatAddr, "r")
	t1 := join(t, n.chatAddr, "t")
	x1 := join(t, n.chatAddr, "x")
	clients := []*wsClient{a1, a2, b1, r1, t1, x1}

	// Refused: server full.
	if _, err := dialWS(t, n.chatAddr, "a", nil); err == nil {
		t.Fatal("a seventh connection was accepted")
	}

	// Three messages in room a, one in b: each reaches every member.
	for i := range 3 {
		a1.sendText(fmt.Sprintf(`{"text":"a%d"}`, i))
		a1.next()
		a2.next()
	}
	b1.sendText(`{"text":"b"}`)
	b1.next()
	// Not JSON: refused as invalid, answered with an error frame.
	b1.sendText(`not json`)
	if m := b1.next(); m["type"] != "error" {
		t.Fatalf("want an error frame, got %v", m)
	}
	// Rate limit: a burst of 3, then refused.
	for i := range 4 {
		r1.sendText(fmt.Sprintf(`{"text":"r%d"}`, i))
	}
	// The error frame may come before the echoes: it does not go through
	// the room.
	texts, limited := 0, 0
	for range 4 {
		switch m := r1.next(); {
		case m["code"] == "rate_limited":
			limited++
		case strings.HasPrefix(fmt.Sprint(m["text"]), "r"):
			texts++
		default:
			t.Fatalf("unexpected frame %v", m)
		}
	}
	if texts != 3 || limited != 1 {
		t.Fatalf("%d echoes and %d rate_limited errors, want 3 and 1", texts, limited)
	}
	// Too big: refused on its header alone.
	t1.sendHeaderOnly(2000)
	if code := t1.closeHandshake(); code != 1009 {
		t.Fatalf("too big: close %d", code)
	}
	// Binary: unsupported.
	x1.send(gws.NewBinaryFrame([]byte{1, 2, 3}))
	if code := x1.closeHandshake(); code != 1003 {
		t.Fatalf("binary: close %d", code)
	}
	// A normal close, and a connection that just goes away.
	a2.send(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, "bye")))
	if code := a2.closeHandshake2(); code != 1000 {
		t.Fatalf("normal close: close %d", code)
	}
	b1.conn.Close()

	var sent, got uint64
	for _, c := range clients {
		sent += c.sent
		got += c.got
	}
	want := map[string]float64{
		"scalechat_connections":                                       2, // a1, r1
		"scalechat_connections_accepted_total":                        6,
		"scalechat_connections_refused_total{reason=max_connections}": 1,
		"scalechat_connections_refused_total{reason=bad_request}":     1,
		"scalechat_connections_refused_total{reason=origin}":          1,
		"scalechat_connections_refused_total{reason=shutting_down}":   0,
		"scalechat_connections_refused_total{reason=internal}":        0,
		"scalechat_rooms":                                        5, // empty rooms stay for the grace period
		"scalechat_history_entries":                              3 + 1 + 3,
		"scalechat_messages_received_total":                      3 + 2 + 4, // frames too big or binary are not messages
		"scalechat_messages_delivered_total":                     3*2 + 1 + 3,
		"scalechat_messages_dropped_total{reason=invalid}":       2,
		"scalechat_messages_dropped_total{reason=too_big}":       1,
		"scalechat_messages_dropped_total{reason=rate_limit}":    1,
		"scalechat_messages_dropped_total{reason=slow_consumer}": 0,
		"scalechat_received_bytes_total":                         float64(sent),
		"scalechat_sent_bytes_total":                             float64(got),
		"scalechat_broker_messages_published_total":              0,
		"scalechat_broker_messages_received_total":               0,
		"scalechat_message_processing_seconds":                   3*2 + 1 + 3, // once per message and loop with members
		"scalechat_disconnects_total{code=1000}":                 1,
		"scalechat_disconnects_total{code=1003}":                 1,
		"scalechat_disconnects_total{code=1006}":                 1,
		"scalechat_disconnects_total{code=1009}":                 1,
	}
	for _, outcome := range []string{"ok", "unauthorized", "bad_request"} {
		want["scalechat_api_requests_total{outcome="+outcome+"}"] = 0
	}
	want["scalechat_api_published_total"] = 0
	for _, code := range []string{"1001", "1002", "1005", "1007", "1008", "1011", "1012", "1013", "4001", "other"} {
		want["scalechat_disconnects_total{code="+code+"}"] = 0
	}
	for _, reason := range []string{"auth", "forbidden", "per_ip", "connect_rate", "rooms_full", "header_too_large", "handshake_timeout", "body_timeout", "body_too_large", "hook"} {
		want["scalechat_connections_refused_total{reason="+reason+"}"] = 0
	}
	for _, reason := range []string{"forbidden", "timeout", "unavailable", "backend_only", "room_full", "hook", "overloaded"} {
		want["scalechat_messages_dropped_total{reason="+reason+"}"] = 0
	}
	for _, name := range []string{"scalechat_http_polls_total", "scalechat_http_polls_waiting",
		"scalechat_http_messages_received_total", "scalechat_http_messages_delivered_total"} {
		want[name] = 0 // no HTTP transport traffic here (see internal/server/poll_test.go)
	}
	// Sizes the test cannot know exactly: checked to be there and positive.
	positive := map[string]bool{"scalechat_history_bytes": true, "scalechat_history_json_bytes": true, "scalechat_http_received_bytes_total": true, "scalechat_http_sent_bytes_total": true}

	// The server counts a write after the syscall that the client may have
	// read already, and b1's end is seen asynchronously: poll briefly.
	var diffs []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		families := n.scrape(t)
		diffs = diffs[:0]
		seen := 0
		for name, f := range families {
			if !strings.HasPrefix(name, "scalechat_") {
				continue
			}
			if f.GetHelp() == "" {
				diffs = append(diffs, name+" has no HELP")
			}
			for _, m := range f.GetMetric() {
				key := name
				if ls := m.GetLabel(); len(ls) > 0 {
					key += "{" + ls[0].GetName() + "=" + ls[0].GetValue() + "}"
				}
				if positive[key] {
					if value(families, name, "") <= 0 {
						diffs = append(diffs, key+" is not positive")
					}
					continue
				}
				exp, ok := want[key]
				if !ok {
					diffs = append(diffs, "unexpected series "+key)
					continue
				}
				seen++
				labels := ""
				if ls := m.GetLabel(); len(ls) > 0 {
					labels = ls[0].GetName() + "=" + ls[0].GetValue()
				}
				if got := value(families, name, labels); got != exp {
					diffs = append(diffs, fmt.Sprintf("%s = %g, want %g", key, got, exp))
				}
			}
		}
		if seen != len(want) {
			diffs = append(diffs, fmt.Sprintf("%d series of %d expected", seen, len(want)))
		}
		if len(diffs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	sort.Strings(diffs)
	for _, d := range diffs {
		t.Error(d)
	}

	// The histogram's 31 buckets and +Inf are cumulative and end with its count; its
	// sum is a plausible duration.
	families := n.scrape(t)
	h := families["scalechat_message_processing_seconds"].GetMetric()[0].GetHistogram()
	var prev uint64
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() < prev {
			t.Errorf("bucket le=%g holds %d, less than the one before", b.GetUpperBound(), b.GetCumulativeCount())
		}
		prev = b.GetCumulativeCount()
	}
	if len(h.GetBucket()) != 32 || prev != h.GetSampleCount() {
		t.Errorf("%d buckets, the last holding %d of %d", len(h.GetBucket()), prev, h.GetSampleCount())
	}
	if s := h.GetSampleSum(); s <= 0 || s > 10 || math.IsNaN(s) {
		t.Errorf("processing time sum %gs", s)
	}
	// The Go and process collectors are there.
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total",
		"process_resident_memory_bytes", "process_open_fds"} {
		if math.IsNaN(value(families, name, "")) {
			t.Errorf("%s is missing", name)
		}
	}
	if v := value(families, "process_open_fds", ""); v < 4 {
		t.Errorf("process_open_fds = %g", v)
	}
}

// closeHandshake2 waits for the server's answer to a close frame the
// client sent first, then for the socket to close.
func (c *wsClient) closeHandshake2() int {
	c.t.Helper()
	for {
		f, err := c.readFrame()
		if err != nil {
			c.t.Fatalf("want a close frame: %v", err)
		}
		if f.Header.OpCode == gws.OpClose {
			code := int(f.Payload[0])<<8 | int(f.Payload[1])
			c.waitEOF()
			return code
		}
	}
}

func TestMetricsEndpoints(t *testing.T) {
	n := startNode(t, nil, Options{})
	tests := []struct {
		path, contentType, contains string
		status                      int
	}{
		{"/metrics", "text/plain", "# HELP scalechat_connections ", 200},
		{"/dashboard", "text/html", "EventSource", 0},
		{"/", "text/html", "EventSource", 200}, // redirected to /dashboard
		{"/nope", "text/plain", "404", 404},
	}
	for _, tt := range tests {
		resp, err := http.Get("http://" + n.metricsAddr + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if tt.status == 0 {
			tt.status = 200
		}
		if resp.StatusCode != tt.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.contentType) ||
			!strings.Contains(string(b), tt.contains) {
			t.Errorf("GET %s: %s %q, body %.80q", tt.path, resp.Status, resp.Header.Get("Content-Type"), b)
		}
	}
}

// TestBrokerMetrics checks the broker's series on a two-node cluster: the
// room is loaded first on the owner, which orders it; the scraped node
// follows it, and its member's three messages go to the owner (published:
// forwarded and answered) and come back in the owner's order (received).
// The owner counts them as ordered by it (owned) and holds the room.
func TestBrokerMetrics(t *testing.T) {
	redis := testsupport.StartRedis(t)
	onRedis := func(c *server.Config) { c.Redis = redis.URL() }
	owner := startNode(t, onRedis, Options{})
	n := startNode(t, onRedis, Options{})
	deadline := time.Now().Add(20 * time.Second)
	for _, node := range []*node{owner, n} {
		for value(node.scrape(t), "scalechat_broker_up", "") != 1 {
			if time.Now().After(deadline) {
				t.Fatal("the broker never came up")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	m := join(t, owner.chatAddr, "c") // the owner loads the room first
	a, b := join(t, n.chatAddr, "c"), join(t, n.chatAddr, "c")
	for i := range 3 {
		a.sendText(fmt.Sprintf(`{"text":"%d"}`, i))
		a.next()
		b.next()
		m.next()
	}
	checkSeries(t, n, deadline, map[string]float64{
		"scalechat_broker_up":                       1,
		"scalechat_broker_messages_published_total": 3,
		"scalechat_broker_messages_received_total":  3,
		"scalechat_broker_owned_messages_total":     0,
		"scalechat_broker_owned_rooms":              0,
		"scalechat_broker_room_releases_total":      0,
		"scalechat_broker_rooms_ceded_total":        0,
		"scalechat_broker_room_takeovers_total":     0,
		"scalechat_broker_rooms_dropped_total":      0,
		"scalechat_broker_refused_total":            0,
		"scalechat_broker_rooms_diverged_total":     0,
		"scalechat_broker_rooms":                    1,
		"scalechat_broker_errors_total":             0,
		"scalechat_broker_local_messages_total":     0,
		"scalechat_broker_gap_fills_total":          0,
		"scalechat_broker_unrecovered_total":        0,
		"scalechat_broker_reconnects_total":         0,
		"scalechat_messages_delivered_total":        6,
		// Timed from the broker's delivery, once per loop with members.
		"scalechat_message_processing_seconds": 6,
	})
	checkSeries(t, owner, deadline, map[string]float64{
		"scalechat_broker_messages_published_total": 0,
		"scalechat_broker_messages_received_total":  0,
		"scalechat_broker_owned_messages_total":     3,
		"scalechat_broker_owned_rooms":              1,
		"scalechat_messages_delivered_total":        3,
	})
}

// checkSeries scrapes n until each series of want has its value, or until
// deadline, and reports those that do not.
func checkSeries(t *testing.T, n *node, deadline time.Time, want map[string]float64) {
	t.Helper()
	var diffs []string
	for {
		families := n.scrape(t)
		diffs = diffs[:0]
		for name, v := range want {
			if got := value(families, name, ""); got != v {
				diffs = append(diffs, fmt.Sprintf("%s = %g, want %g", name, got, v))
			}
		}
		if len(diffs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	sort.Strings(diffs)
	for _, d := range diffs {
		t.Error(d)
	}
}

// A single node has no broker: the two message counters are 0, and the
// broker's health series are absent rather than claiming an outage.
func TestSingleNodeHasNoBrokerHealth(t *testing.T) {
	n := startNode(t, nil, Options{})
	families := n.scrape(t)
	for name := range clusterOnly {
		if families[name] != nil {
			t.Errorf("a single node exposes %s", name)
		}
	}
	for _, name := range []string{"scalechat_broker_messages_published_total", "scalechat_broker_messages_received_total"} {
		if v := value(families, name, ""); v != 0 {
			t.Errorf("%s = %g", name, v)
		}
	}
}
