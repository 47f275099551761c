//go:build linux

package loadtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/centrifugal/centrifuge"

	"github.com/scalechat/scalechat/internal/fivefield"
	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/server/servertest"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// fiveFieldServer runs the five-field reference server (internal/fivefield)
// on a loopback port.
type fiveFieldServer struct {
	*fivefield.Server
	url string
}

func startFiveFieldServer(t *testing.T, everyone bool) *fiveFieldServer {
	s := fivefield.New()
	s.Everyone = everyone
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	return &fiveFieldServer{Server: s, url: "ws://" + ln.Addr().String() + "/ws"}
}

// waitCloses waits until n connections have ended and returns their close codes.
func (s *fiveFieldServer) waitCloses(t *testing.T, n int) map[int]int {
	t.Helper()
	var c map[int]int
	testsupport.Eventually(t, 5*time.Second, fmt.Sprintf("%d connections to end", n), func() bool {
		c = s.CloseCodes()
		sum := 0
		for _, v := range c {
			sum += v
		}
		return sum >= n
	})
	return c
}

func TestLegacyProtocolAgainstFiveFieldServer(t *testing.T) {
	srv := startFiveFieldServer(t, false)
	cfg := testConfig(t, srv.url, testStep("legacy", 2, 3))
	cfg.Protocol = ProtocolLegacy
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	if len(res.Failures) > 0 || s.Joined != 6 || s.Sent != 60 || s.Expected != 180 || s.Received != 180 || s.Unexpected != 0 {
		t.Fatalf("legacy: %+v %v", s, res.Failures)
	}
	if s.LatencyMs.Max <= 0 || s.LatencyMs.Max > 1000 {
		t.Errorf("latency from sent_at: %+v", s.LatencyMs)
	}
	checkCSVAgainstMeta(t, readCSV(t, cfg.Out), readMeta(t, cfg.Out))
	if c := srv.waitCloses(t, 6); c[1000] != 6 {
		t.Errorf("close codes seen by the server: %v, want 6 × 1000", c)
	}
}

// The default protocol against a five-field server fails at once with a
// sentence that names the cause, and still closes every socket with 1000.
func TestScalechatProtocolAgainstFiveFieldServer(t *testing.T) {
	srv := startFiveFieldServer(t, false)
	cfg := testConfig(t, srv.url, testStep("wrong", 2, 3))
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	if s.ConnectErrors != 6 || !strings.Contains(s.FirstError, "--protocol legacy") || len(res.Failures) == 0 {
		t.Fatalf("step %+v failures %v", s, res.Failures)
	}
	if c := srv.waitCloses(t, 6); c[1000] != 6 {
		t.Errorf("close codes seen by the server: %v, want 6 × 1000", c)
	}
}

// An echo run against a server that broadcasts to every connection sees
// other clients' messages: unexpected, and the run fails.
func TestEchoAgainstBroadcastServerIsUnexpected(t *testing.T) {
	srv := startFiveFieldServer(t, true)
	cfg := testConfig(t, srv.url+"/echo", testStep("echo", 3, 2))
	cfg.Protocol = ProtocolEcho
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	// 6 clients, 10 messages each, each delivered to all 6: 60 expected
	// back, 300 from others, less what a client closes on: once its own
	// last message is back, every earlier one has come (one queue in
	// order), so at most the 5 others' last ones are still on their way.
	if s.Expected != 60 || s.Received != 60 || s.Unexpected < 300-6*5 || s.Unexpected > 300 {
		t.Fatalf("step %+v", s)
	}
	if want := fmt.Sprintf("%d unexpected deliveries", s.Unexpected); len(res.Failures) != 1 || !strings.Contains(res.Failures[0], want) {
		t.Fatalf("failures %v", res.Failures)
	}
	cfg = testConfig(t, srv.url+"/echo", testStep("echo", 3, 2))
	cfg.Protocol, cfg.MaxUnexpected = ProtocolEcho, 300
	if res := runTest(t, cfg); len(res.Failures) != 0 {
		t.Fatalf("--max-unexpected 300: failures %v", res.Failures)
	}
}

// Every protocol against scalechat serve: legacy clients are five-field
// clients to it.
func TestProtocolsAgainstRealServer(t *testing.T) {
	ts := servertest.Start(t, func(c *server.Config) { c.EchoEndpoint = true })
	for _, tt := range []struct {
		protocol, path string
		rooms, size    int
		rpc            int
	}{
		{ProtocolScalechat, "/ws", 3, 4, 2},
		{ProtocolLegacy, "/ws", 3, 4, 1},
		{ProtocolEcho, "/echo", 3, 4, 1},
	} {
		t.Run(tt.protocol, func(t *testing.T) {
			st := testStep(tt.protocol, tt.rooms, tt.size)
			st.RoomsPerClient = tt.rpc
			cfg := testConfig(t, ts.URL(tt.path), st)
			cfg.Protocol = tt.protocol
			res := runTest(t, cfg)
			s := res.Meta.Steps[0]
			if len(res.Failures) > 0 || s.Joined != 12 || s.Received != s.Expected || s.Expected == 0 || s.Unexpected != 0 || s.Invalid != 0 {
				t.Fatalf("step %+v failures %v", s, res.Failures)
			}
			checkCSVAgainstMeta(t, readCSV(t, cfg.Out), readMeta(t, cfg.Out))
		})
	}
}

// startCentrifuge starts a server built on the centrifuge library (the
// engine of Centrifugo): anonymous clients may subscribe to and publish
// into any channel.
func startCentrifuge(t *testing.T) string {
	node, err := centrifuge.New(centrifuge.Config{LogLevel: centrifuge.LogLevelError, LogHandler: func(e centrifuge.LogEntry) { t.Logf("centrifuge: %s %v", e.Message, e.Fields) }})
	if err != nil {
		t.Fatal(err)
	}
	node.OnConnecting(func(context.Context, centrifuge.ConnectEvent) (centrifuge.ConnectReply, error) {
		return centrifuge.ConnectReply{Credentials: &centrifuge.Credentials{UserID: ""}}, nil
	})
	node.OnConnect(func(c *centrifuge.Client) {
		c.OnSubscribe(func(_ centrifuge.SubscribeEvent, cb centrifuge.SubscribeCallback) {
			cb(centrifuge.SubscribeReply{}, nil)
		})
		c.OnPublish(func(_ centrifuge.PublishEvent, cb centrifuge.PublishCallback) {
			cb(centrifuge.PublishReply{}, nil)
		})
	})
	if err := node.Run(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/connection/websocket", centrifuge.NewWebsocketHandler(node, centrifuge.WebsocketConfig{}))
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = node.Shutdown(ctx)
		srv.Close()
	})
	return "ws://" + ln.Addr().String() + "/connection/websocket"
}

func TestCentrifugoProtocolAgainstCentrifuge(t *testing.T) {
	url := startCentrifuge(t)
	st := testStep("centrifugo", 3, 4)
	st.RoomsPerClient = 2
	cfg := testConfig(t, url, st)
	cfg.Protocol, cfg.Namespace = ProtocolCentrifugo, "chat"
	res := runTest(t, cfg)
	s := res.Meta.Steps[0]
	if len(res.Failures) > 0 || s.Joined != 12 || s.Sent != 120 || s.Received != s.Expected || s.Expected == 0 || s.Unexpected != 0 || s.Invalid != 0 {
		t.Fatalf("step %+v failures %v", s, res.Failures)
	}
	checkCSVAgainstMeta(t, readCSV(t, cfg.Out), readMeta(t, cfg.Out))
}

// What the legacy adapter sends survives the original server's round trip
// (five fields decoded and encoded again) byte for byte, and is read back
// as sent: sender, counter, due time (whatever its trailing zeros) and room.
func TestLegacyMessageSurvivesTheFiveFieldRoundTrip(t *testing.T) {
	p := &stepPlan{roomPre: "run-s1-r"}
	base := time.Date(2026, 11, 23, 10, 37, 7, 0, time.UTC).UnixMicro()
	for _, tt := range []struct {
		name    string
		due     int64
		sender  uint64
		counter uint32
	}{
		{"six fraction digits", base + 123456, 7, 1},
		{"trailing zeros trimmed", base + 120000, 1 << 40, 1<<32 - 1},
		{"whole second", base, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sent := legacyWire{}.appendMessage(nil, p, 3, tt.sender, tt.counter, tt.due, "xxxx")
			back, err := fivefield.Reencode(sent)
			if err != nil {
				t.Fatal(err)
			}
			if string(back) != string(sent) {
				t.Errorf("changed by the round trip:\n sent %s\n back %s", sent, back)
			}
			in := legacyWire{}.decode(back, nil)
			if len(in) != 1 {
				t.Fatalf("decoded %d", len(in))
			}
			x := in[0]
			if x.kind != inMessage || !x.hasID || x.sender != tt.sender || x.counter != uint64(tt.counter) ||
				!x.hasDue || x.due != tt.due || string(x.room) != "run-s1-r3" {
				t.Errorf("read back %+v from %s", x, back)
			}
		})
	}
}
