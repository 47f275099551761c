//go:build linux

package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	gws "github.com/gobwas/ws"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// maskedTexts returns texts as the masked text frames a client sends.
func maskedTexts(t *testing.T, texts ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, s := range texts {
		if err := gws.WriteFrame(&b, gws.MaskFrameInPlace(gws.NewTextFrame([]byte(s)))); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// dialLegacySending connects a five-field client to room and sends frames
// with its upgrade request, in one write: they are then read before the
// room can have loaded from the broker, however fast Redis answers.
func dialLegacySending(t *testing.T, ts *testServer, room string, frames []byte) *client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var req bytes.Buffer
	fmt.Fprintf(&req, "GET /ws/%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", room, ts.addr)
	req.Write(frames)
	if _, err := conn.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return &client{t: t, conn: conn, r: r}
}

// On a cluster node a room loads from the broker before anyone joins it. A
// five-field client that sends at once is held, not refused as "not a
// member": its messages are published once the room is loaded.
func TestLegacyClientSendsWhileItsRoomLoads(t *testing.T) {
	nodes := startCluster(t, testsupport.StartRedis(t).URL(), 2, nil)
	tests := []struct {
		name string
		dial func(t *testing.T, room string, first string) *client
	}{
		{"in the upgrade's packet", func(t *testing.T, room string, first string) *client {
			return dialLegacySending(t, nodes[1], room, maskedTexts(t, first))
		}},
		{"right after the upgrade", func(t *testing.T, room string, first string) *client {
			c, _ := dialLegacy(t, nodes[1].url("/ws/"+room))
			c.sendText(first)
			return c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for try := range 5 {
				room := fmt.Sprintf("load-%d-%d", len(tt.name), try)
				w := connect(t, nodes[0], room) // the room lives on the other node
				c := tt.dial(t, room, `{"message_id":1,"sender":"old","text":"first","room":"`+room+`"}`)
				c.sendText(`{"message_id":2,"sender":"old","text":"second"}`)
				for _, want := range []string{"first", "second"} {
					if m := c.next(); m["text"] != want {
						t.Fatalf("try %d: the sender got %v, want %q", try, m, want)
					}
					if m := w.next(); m["text"] != want {
						t.Fatalf("try %d: the other node's member got %v, want %q", try, m, want)
					}
				}
			}
		})
	}
}

// The messages held while the room loads are bounded: past maxHeld, the
// client is closed with 1008 and the reason says why.
func TestLegacyHeldMessagesAreBounded(t *testing.T) {
	nodes := startCluster(t, testsupport.StartRedis(t).URL(), 2, nil)
	var texts []string
	for i := range maxHeld + 1 {
		texts = append(texts, fmt.Sprintf(`{"text":"%d"}`, i))
	}
	c := dialLegacySending(t, nodes[1], "flood", maskedTexts(t, texts...))
	f, err := c.readFrame(5 * time.Second)
	if err != nil || f.Header.OpCode != gws.OpClose {
		t.Fatalf("got %v %v, want the close frame and no message", f.Header, err)
	}
	if code, reason := closeOf(f); code != 1008 || reason != fmt.Sprintf("more than %d messages were sent while the room loads", maxHeld) {
		t.Fatalf("closed with %d %q", code, reason)
	}
}
