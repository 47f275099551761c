//go:build linux

package server

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
)

// TestShutdownDeliversEveryAcceptedMessageToEveryMember races many
// publishes on every loop against a shutdown: a message one loop accepted
// must reach the members of every loop, also those of a loop that drained
// first (it used to close its members before another loop had stopped
// reading, and the messages read there meanwhile reached only part of the
// room).
func TestShutdownDeliversEveryAcceptedMessageToEveryMember(t *testing.T) {
	for round := range 5 {
		ts := startServer(t, func(c *Config) { c.Loops = 4; c.ShutdownTimeout = 3 * time.Second; c.RateLimit, c.RateBurst = 1e6, 1e6 })
		const members = 12
		clients := make([]*client, members)
		for i := range clients {
			clients[i] = connect(t, ts, "drain")
		}
		got := make([]map[float64]bool, members)
		codes := make([]int, members)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, c := range clients {
			got[i] = map[float64]bool{}
			var wmu sync.Mutex // the writer and the close answer share the socket
			wg.Go(func() {     // writer: as fast as the socket takes it, at most 2,000 messages
				<-start
				b, _ := json.Marshal(msg("m"))
				for range 2000 {
					time.Sleep(time.Millisecond) // a busy room, not a flood: no member falls behind
					wmu.Lock()
					err := gws.WriteFrame(c.conn, gws.MaskFrameInPlace(gws.NewTextFrame(append([]byte(nil), b...))))
					wmu.Unlock()
					if err != nil {
						return
					}
				}
			})
			wg.Go(func() { // reader: every seq until the close frame
				for {
					f, err := c.readFrame(10 * time.Second)
					if err != nil {
						return
					}
					switch f.Header.OpCode {
					case gws.OpText:
						var m map[string]any
						if json.Unmarshal(f.Payload, &m) == nil && m["type"] == nil {
							got[i][m["seq"].(float64)] = true
						}
					case gws.OpClose:
						codes[i], _ = closeOf(f)
						wmu.Lock()
						_ = gws.WriteFrame(c.conn, gws.MaskFrameInPlace(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, ""))))
						wmu.Unlock()
						return
					}
				}
			})
		}
		close(start)
		time.Sleep(30 * time.Millisecond) // let the writers get going: the shutdown must land mid-stream
		ts.cancel()
		wg.Wait()
		if !ts.wait(5 * time.Second) {
			t.Fatal("Serve did not return")
		}
		all := map[float64]bool{}
		for _, g := range got {
			for s := range g {
				all[s] = true
			}
		}
		if len(all) == 0 {
			t.Fatalf("round %d: no message was delivered at all", round)
		}
		for i, g := range got {
			if codes[i] != 1001 {
				t.Errorf("round %d: member %d closed with %d, want 1001", round, i, codes[i])
			}
			if missing := len(all) - len(g); missing > 0 {
				t.Errorf("round %d: member %d missed %d of the %d messages the room accepted", round, i, missing, len(all))
			}
		}
	}
}
