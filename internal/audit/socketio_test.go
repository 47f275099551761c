//go:build linux

package audit

import (
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

func TestSocketIOURL(t *testing.T) {
	for _, tt := range []struct{ base, want string }{
		{"ws://127.0.0.1:3000", "ws://127.0.0.1:3000/socket.io/?EIO=4&transport=websocket"},
		{"ws://127.0.0.1:3000/", "ws://127.0.0.1:3000/socket.io/?EIO=4&transport=websocket"},
		{"ws://127.0.0.1:3000/io/?token=a", "ws://127.0.0.1:3000/io/?EIO=4&token=a&transport=websocket"},
	} {
		if got, err := socketioURL(tt.base); err != nil || got != tt.want {
			t.Errorf("%s: %s %v, want %s", tt.base, got, err, tt.want)
		}
	}
}

// Against a real socket.io server (deploy/socketio): with connections cut
// every 150 ms, what a client missed while away is reported, not a broken
// guarantee, since Socket.IO cannot resume; through a proxy that drops
// every 50th chat frame on connections that stay up, each drop is a
// missing delivery and the audit fails. The server pings every 200 ms: a
// client that did not answer would be cut.
func TestSocketIOAgainstSocketIO(t *testing.T) {
	srv := testsupport.StartSocketIO(t, "--ping-interval", "200", "--ping-timeout", "200")
	cfg := testConfig(srv.URL())
	cfg.Protocol = ProtocolSocketIO
	res := run(t, cfg)
	if res.Broken || res.Sent == 0 || res.Expected != 4*res.Sent || res.Delivered != res.Expected || res.Foreign != 0 {
		t.Fatalf("result %+v", res)
	}
	cfg = testConfig(srv.URL())
	cfg.Protocol, cfg.DropEvery = ProtocolSocketIO, 150*time.Millisecond
	res = run(t, cfg)
	if res.Broken || res.MissedAway == 0 || res.Missing != 0 || res.Delivered+res.MissedAway != res.Expected || len(res.Faults) < 5 {
		t.Fatalf("result %+v", res)
	}
	p := startPlant(t, srv.Addr, plantDrop, 50)
	cfg = testConfig("ws://" + p.addr)
	cfg.Protocol = ProtocolSocketIO
	res = run(t, cfg)
	if !res.Broken || res.Missing != p.planted.Load() || res.Missing == 0 {
		t.Fatalf("planted %d; result %+v", p.planted.Load(), res)
	}
}
