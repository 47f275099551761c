//go:build linux

package server

import (
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/protocol"
)

// An HTTP publish whose room was freed between its look-up and its publish
// (a room of pollers alone, freed as its last poll ended) goes to the room
// made anew instead of failing with "the room was freed" (CI saw a POST
// answered 503 so: TestPollLosslessAgainstRealServer).
func TestHTTPPublishToAFreedRoomGoesToItsSuccessor(t *testing.T) {
	ts := startServer(t, nil)
	stale := ts.hub.Open([]byte("freed"))
	if !ts.hub.Drop("freed", nil) {
		t.Fatal("the room was not dropped")
	}
	if !stale.Closed() {
		t.Fatal("the dropped room is not closed")
	}
	var f protocol.Frame
	if err := protocol.ParseFrame([]byte(`{"text":"hi"}`), &f); err != nil {
		t.Fatal(err)
	}
	draft, at := protocol.AppendChatDraft(nil, "freed", time.Now(), &f, []byte(`{"text":"hi"}`))
	seq, err := ts.publishWait(t.Context(), stale, draft, at)
	if err != nil || seq != 1 {
		t.Fatalf("publish to a freed room: seq %d, %v; want 1, nil", seq, err)
	}
	if _, cur, _ := ts.hub.Position("freed"); cur != 1 || ts.hub.Open([]byte("freed")) == stale {
		t.Fatalf("the room made anew has seq %d, want 1", cur)
	}
}
