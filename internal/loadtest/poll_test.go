//go:build linux

package loadtest

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/server/servertest"
)

// startPollServer runs the real server with a POST rate limit that the
// test's clients, all on 127.0.0.1, stay under.
func startPollServer(t *testing.T, tweak func(*server.Config)) *servertest.Server {
	return servertest.Start(t, func(c *server.Config) {
		c.RateLimit, c.RateBurst = 100_000, 100_000
		if tweak != nil {
			tweak(c)
		}
	})
}

func TestPollLosslessAgainstRealServer(t *testing.T) {
	srv := startPollServer(t, nil)
	for _, tt := range []struct {
		name     string
		interval time.Duration
		step     Step
	}{
		{"long polling, rooms", 0, testStep("long", 5, 4)},
		{"long polling, one room", 0, testStep("oneroom", 1, 12)},
		{"plain polling", 50 * time.Millisecond, testStep("plain", 5, 4)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, srv.HTTPURL(""), tt.step)
			cfg.Transport, cfg.PollInterval = TransportPoll, Duration(tt.interval)
			res := runTest(t, cfg)
			if len(res.Failures) > 0 {
				t.Fatalf("failures: %v", res.Failures)
			}
			s := res.Meta.Steps[0]
			clients := int64(tt.step.Clients())
			// Every 100 ms for 1 s: 10 messages per client, each to every member of its room.
			if s.Joined != clients || s.Sent != clients*10 || s.Expected != s.Sent*int64(tt.step.RoomSize) ||
				s.Received != s.Expected || s.ReceivedAll != s.Expected || s.Lost != 0 {
				t.Fatalf("step %+v", s)
			}
			if s.SendErrors != 0 || s.PollErrors != 0 || s.ConnectErrors != 0 || s.OutOfOrder != 0 || s.Invalid != 0 || s.HistoryGaps != 0 {
				t.Errorf("anomalies %+v", s)
			}
			if s.LatencyMs.P50 <= 0 || s.LatencyMs.Max < s.LatencyMs.P99 {
				t.Errorf("latency %+v", s.LatencyMs)
			}
			if s.ConnectMs.P50 <= 0 || s.ConnectMs.Max > 5000 || s.SendEndedAt.Sub(s.SendStartedAt) < time.Second {
				t.Errorf("connect times %+v, sending window %v – %v", s.ConnectMs, s.SendStartedAt, s.SendEndedAt)
			}
			m := readMeta(t, cfg.Out)
			if m.Transport != TransportPoll || (tt.interval > 0) != (m.PollInterval > 0) || (tt.interval == 0) != (m.PollWait > 0) {
				t.Errorf("meta transport %q interval %v wait %v", m.Transport, m.PollInterval, m.PollWait)
			}
			checkCSVAgainstMeta(t, readCSV(t, cfg.Out), m)
		})
	}
}

// --senders and --clients work over HTTP as over WebSocket.
func TestPollSenders(t *testing.T) {
	srv := startPollServer(t, nil)
	st := testStep("few", 3, 1)
	st.NumClients, st.Senders = 9, 3
	cfg := testConfig(t, srv.HTTPURL(""), st)
	cfg.Transport = TransportPoll
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	// 3 senders × 10 messages, each to the 3 members of its room.
	if len(res.Failures) > 0 || s.Joined != 9 || s.Sent != 30 || s.Expected != 90 || s.Received != 90 {
		t.Fatalf("failures %v, step %+v", res.Failures, s)
	}
}

// A long poll answers as soon as a message comes: with one message per
// client and a wait far longer than the run, the latencies are those of
// the server, not of the wait.
func TestLongPollAnswersAtOnce(t *testing.T) {
	srv := startPollServer(t, nil)
	st := testStep("once", 4, 2)
	st.MsgFrequency, st.Duration = Duration(time.Second), Duration(time.Second)
	cfg := testConfig(t, srv.HTTPURL(""), st)
	cfg.Transport, cfg.PollWait = TransportPoll, Duration(50*time.Second)
	start := time.Now()
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	if len(res.Failures) > 0 || s.Sent != 8 || s.Received != 16 {
		t.Fatalf("failures %v, step %+v", res.Failures, s)
	}
	if s.LatencyMs.Max > 1000 {
		t.Errorf("a delivery took %.0f ms: the long poll waited instead of answering", s.LatencyMs.Max)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the run took %v: closing did not end the waiting polls", d)
	}
}

func TestPollErrorsAreCounted(t *testing.T) {
	t.Run("rate limited POSTs", func(t *testing.T) {
		// Everyone posts from 127.0.0.1: the server's per-address limit of
		// 5/s (burst 5) refuses most of 100 messages a second with 429.
		srv := servertest.Start(t, func(c *server.Config) { c.RateLimit, c.RateBurst = 5, 5 })
		cfg := testConfig(t, srv.HTTPURL(""), testStep("limited", 2, 5))
		cfg.Transport = TransportPoll
		cfg.Steps[0].Drain = Duration(300 * time.Millisecond)
		res := runTest(t, cfg)
		s := res.Meta.Steps[0]
		if s.Sent != 100 || s.SendErrors < 50 || s.SendErrors > 95 || s.Lost != s.SendErrors*5 || !strings.Contains(s.FirstError, "429") {
			t.Fatalf("step %+v", s)
		}
		if !hasFailure(res, "HTTP requests failed") {
			t.Errorf("failures %v", res.Failures)
		}
	})
	t.Run("timeouts and 5xx", func(t *testing.T) {
		// A server that answers the first poll, then lets polls hang past the
		// request timeout and refuses POSTs with 503.
		var polls atomic.Int64
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				http.Error(w, `{"type":"error","code":"shutting_down"}`, http.StatusServiceUnavailable)
				return
			}
			if r.URL.Query().Get("since") == "" {
				w.Write([]byte(`{"room":"x","seq":0,"messages":[]}`))
				return
			}
			polls.Add(1)
			<-r.Context().Done()
		}))
		t.Cleanup(ts.Close)
		st := testStep("hang", 1, 2)
		st.Drain = Duration(1500 * time.Millisecond)
		cfg := testConfig(t, ts.URL, st)
		cfg.Transport, cfg.PollWait, cfg.ConnectTimeout = TransportPoll, Duration(100*time.Millisecond), Duration(300*time.Millisecond)
		res := runTest(t, cfg)
		s := res.Meta.Steps[0]
		if s.Joined != 2 || s.Sent != 20 || s.SendErrors != 20 || s.PollErrors < 2 || s.Received != 0 || s.Lost != 40 {
			t.Fatalf("step %+v", s)
		}
		if !strings.Contains(s.FirstError, "503") && !strings.Contains(s.FirstError, "timed out") {
			t.Errorf("first error %q", s.FirstError)
		}
	})
	t.Run("refused first poll", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no", http.StatusForbidden)
		}))
		t.Cleanup(ts.Close)
		cfg := testConfig(t, ts.URL, testStep("refused", 1, 3))
		cfg.Transport = TransportPoll
		res := runTest(t, cfg)
		s := res.Meta.Steps[0]
		if s.Joined != 0 || s.ConnectErrors != 3 || s.Sent != 0 || !strings.Contains(s.FirstError, "403") {
			t.Fatalf("step %+v", s)
		}
	})
}

func hasFailure(res *Result, sub string) bool {
	for _, f := range res.Failures {
		if strings.Contains(f, sub) {
			return true
		}
	}
	return false
}

func TestPollConfig(t *testing.T) {
	for _, tt := range []struct {
		name, url, want string
		edit            func(*Config)
	}{
		{"ws url", "ws://127.0.0.1:1/ws", "needs an http:// URL", nil},
		{"echo", "http://127.0.0.1:1", "scalechat's protocol only", func(c *Config) { c.Protocol = ProtocolEcho }},
		{"rooms per client", "http://127.0.0.1:1", "one room per client", func(c *Config) { c.Steps[0].RoomsPerClient = 2 }},
		{"long wait", "http://127.0.0.1:1", "poll wait", func(c *Config) { c.PollWait = Duration(time.Hour) }},
		{"bad port", "http://127.0.0.1:99999", "bad port", nil},
		{"ok", "http://localhost:1/prefix/", "", nil},
		{"host name", "http://scalechat.example:8080", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, tt.url, testStep("s", 2, 1))
			cfg.Transport = TransportPoll
			if tt.edit != nil {
				tt.edit(cfg)
			}
			err := cfg.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
	tgt, err := parsePollTarget("http://localhost:8080/base/?token=abc")
	if err != nil {
		t.Fatal(err)
	}
	if got := tgt.roomURL("r1", "since=3"); got != "http://localhost:8080/base/rooms/r1/messages?token=abc&since=3" {
		t.Errorf("roomURL = %s", got)
	}
}

// The CLI with --transport poll over two worker processes, then Ctrl+C
// while sending: the merged counts hold and every CSV row is whole.
func TestPollWorkersAndInterrupt(t *testing.T) {
	srv := startPollServer(t, nil)
	out := filepath.Join(t.TempDir(), "run.csv")
	p := startLoadtest(t, "--transport", "poll", "--url", srv.HTTPURL(""), "--rooms", "4", "--room-size", "5", "--workers", "2",
		"--msg-frequency", "100ms", "--duration", "1s", "--drain", "3s", "--ramp", "3000", "--out", out)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	meta := readMeta(t, out)
	s := meta.Steps[0]
	if meta.Transport != TransportPoll || s.Sent != 200 || s.Expected != 1000 || s.Received != 1000 || s.Joined != 20 {
		t.Fatalf("transport %q, merged step %+v", meta.Transport, s)
	}
	var rows []csvRow
	for _, part := range meta.Parts {
		rows = append(rows, readCSV(t, filepath.Join(filepath.Dir(out), part))...)
	}
	checkCSVAgainstMeta(t, rows, meta)

	out2 := filepath.Join(t.TempDir(), "int.csv")
	p = startLoadtest(t, "--transport", "poll", "--url", srv.HTTPURL(""), "--rooms", "4", "--room-size", "5",
		"--msg-frequency", "50ms", "--duration", "30s", "--out", out2)
	p.waitLine(t, "sending")
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 130 {
		t.Fatalf("exit code %d after Ctrl+C, want 130", code)
	}
	meta = readMeta(t, out2)
	if s := meta.Steps[0]; !s.Interrupted || s.Sent == 0 || s.Received != s.Expected {
		t.Errorf("interrupted step %+v", s)
	}
	readCSV(t, out2) // every line parses
}
