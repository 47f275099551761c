//go:build linux

package loadtest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// TestAutobahnFuzzingServer drives the lab's WebSocket client, the event
// loop's own code (upgrade, ws.Reader, inflater, pings, the closing
// handshake), through every case of a running Autobahn fuzzingserver,
// echoing each message as it came. scripts/autobahn.sh --client starts the
// fuzzingserver, runs this test and judges the report it writes; without
// SCALECHAT_AUTOBAHN_URL (ws://host:port of the fuzzingserver) it is skipped.
// SCALECHAT_AUTOBAHN_AGENT names the client in the report, and
// SCALECHAT_AUTOBAHN_COMPRESSION=1 offers permessage-deflate.
func TestAutobahnFuzzingServer(t *testing.T) {
	base := os.Getenv("SCALECHAT_AUTOBAHN_URL")
	if base == "" {
		t.Skip("SCALECHAT_AUTOBAHN_URL is not set (scripts/autobahn.sh --client sets it)")
	}
	agent := cmp.Or(os.Getenv("SCALECHAT_AUTOBAHN_AGENT"), "scalechat-loadtest")
	n, err := strconv.Atoi(autobahnText(t, base+"/getCaseCount"))
	if err != nil {
		t.Fatalf("case count: %v", err)
	}
	h := newEchoLoop(t, base, os.Getenv("SCALECHAT_AUTOBAHN_COMPRESSION") == "1")
	for i := 1; i <= n; i++ {
		h.run(t, fmt.Sprintf("/runCase?case=%d&agent=%s", i, url.QueryEscape(agent)))
	}
	autobahnText(t, base+"/updateReports?agent="+url.QueryEscape(agent))
}

// autobahnText reads the fuzzingserver's answer on one of its own
// endpoints (the case count; nothing, for the reports) until it closes.
func autobahnText(t *testing.T, u string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, br, _, err := gws.Dial(ctx, u)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	defer conn.Close()
	rw := io.ReadWriter(conn)
	if br != nil { // what came with the upgrade's answer
		rw = struct {
			io.Reader
			io.Writer
		}{io.MultiReader(br, conn), conn}
	}
	var text string
	for {
		b, err := wsutil.ReadServerText(rw)
		if err != nil {
			return text // the fuzzingserver closes once it has answered
		}
		text = string(b)
	}
}

// echoLoop is one event loop whose one client per case echoes every
// message back (loop.echoFrames).
type echoLoop struct {
	l      *loop
	plan   *stepPlan
	st     *loopStep // the step of the last client started
	closed chan *client
}

func newEchoLoop(t *testing.T, base string, compression bool) *echoLoop {
	t.Helper()
	cfg := &Config{URL: base, Protocol: ProtocolEcho, Compression: compression, ConnectTimeout: Duration(time.Minute),
		Steps: []Step{{Name: "autobahn", Rooms: 1, RoomSize: 1, RoomsPerClient: 1}}}
	l := newTestLoop(t, cfg)
	h := &echoLoop{l: l, plan: newStepPlan(cfg, 0, 0), closed: make(chan *client, 1)}
	l.echoFrames = true
	l.socketClosed = func(c *client) { h.closed <- c }
	go l.run()
	t.Cleanup(func() {
		l.do(func() { l.quit = true })
		<-l.done
	})
	return h
}

// run connects one client to path and waits until its socket is closed.
func (h *echoLoop) run(t *testing.T, path string) {
	t.Helper()
	h.wait(t, path, h.start(path))
}

// start connects one client to path.
func (h *echoLoop) start(path string) *client {
	c := &client{fd: -1, src: -1, rooms: make([]membership, 1)}
	st := &loopStep{plan: h.plan, name: "autobahn", clients: []*client{c}}
	h.st = st
	h.l.call(func() {
		h.l.tgt.path = path
		h.l.beginStep(st, 1e6)
	})
	return c
}

// wait waits until c's socket is closed and ends its step.
func (h *echoLoop) wait(t *testing.T, path string, c *client) {
	t.Helper()
	select {
	case got := <-h.closed:
		if got != c {
			t.Fatalf("%s: another client's socket closed", path)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: the connection did not end within 2 minutes", path)
	}
	var first firstErrors
	h.l.call(func() { _, _, _, _, first = h.l.finishStep() })
	if first.conn != "" {
		t.Logf("%s: %s", path, first.conn) // the report says whether the case wanted it
	}
}
