package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// testJetStream connects to url until the test ends.
func testJetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func openNATSRooms(t *testing.T, url string, replicas int) *natsRooms {
	t.Helper()
	js := testJetStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := newNATSRooms(ctx, js, "scalechat_rooms", replicas)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// epochs hands out e1, e2, … so that a test can tell which epoch a record
// has.
func epochs() func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("e%d", n)
	}
}

// A room's life on the bucket, step by step: claimed, found held, handed
// on, refused to its old holder, released with its seq kept, claimed again
// in its epoch; its name any text.
func TestNATSRoomsClaimHandOverRelease(t *testing.T) {
	s := openNATSRooms(t, testsupport.StartNATS(t), 1)
	ctx := context.Background()
	room := "a room/with spaces.ü*>"
	newEpoch := epochs()
	type want struct {
		holder, epoch string
		seq           uint64
	}
	for _, c := range []struct {
		name    string
		do      func() error
		wantErr error
		after   want
	}{
		{"a claims a new room", func() error { _, err := s.claim(ctx, room, "a", newEpoch); return err }, nil, want{"a", "e1", 0}},
		{"b finds it held", func() error {
			r, err := s.claim(ctx, room, "b", newEpoch)
			if err == nil && r.holder != "a" {
				return fmt.Errorf("b's claim says the holder is %q", r.holder)
			}
			return err
		}, nil, want{"a", "e1", 0}},
		{"a hands it to b after seq 5", func() error { return s.handOver(ctx, room, "a", "b", 5) }, nil, want{"b", "e1", 5}},
		{"a, no longer its holder, cannot", func() error { return s.handOver(ctx, room, "a", "c", 9) }, errRoomMoved, want{"b", "e1", 5}},
		{"b releases it after seq 3: the seq stays 5", func() error { return s.handOver(ctx, room, "b", "", 3) }, nil, want{"", "e1", 5}},
		{"a claims it again, in its epoch", func() error { _, err := s.claim(ctx, room, "a", newEpoch); return err }, nil, want{"a", "e1", 5}},
	} {
		err := c.do()
		if !errors.Is(err, c.wantErr) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.wantErr)
		}
		r, err := s.read(ctx, room)
		if err != nil {
			t.Fatal(err)
		}
		if got := (want{r.holder, r.epoch, r.seq}); got != c.after {
			t.Fatalf("%s: the room is %+v, want %+v", c.name, got, c.after)
		}
	}
}

// A takeover ends the stream of a dead holder once: a new epoch, nobody
// holding it; a takeover of a holder that is not the dead one, or a second
// one, changes nothing, and the dead holder can hand nothing on after it.
func TestNATSRoomsTakeOverFencesTheDeadHolder(t *testing.T) {
	s := openNATSRooms(t, testsupport.StartNATS(t), 1)
	ctx := context.Background()
	newEpoch := epochs()
	if _, err := s.claim(ctx, "r", "a", newEpoch); err != nil {
		t.Fatal(err)
	}
	if r, err := s.takeOver(ctx, "r", "b", newEpoch); !errors.Is(err, errRoomMoved) || r.holder != "a" {
		t.Fatalf("takeover of a holder that is not the dead one: %+v, %v", r, err)
	}
	r, err := s.takeOver(ctx, "r", "a", newEpoch)
	if err != nil || r.holder != "" || r.epoch != "e2" {
		t.Fatalf("takeover of the dead holder: %+v, %v; want no holder, epoch e2", r, err)
	}
	if _, err := s.takeOver(ctx, "r", "a", newEpoch); !errors.Is(err, errRoomMoved) {
		t.Fatalf("a second takeover: %v, want errRoomMoved", err)
	}
	if err := s.handOver(ctx, "r", "a", "c", 7); !errors.Is(err, errRoomMoved) {
		t.Fatalf("the dead holder handed the room on after the takeover: %v", err)
	}
	if _, err := s.takeOver(ctx, "never-seen", "a", newEpoch); !errors.Is(err, errRoomMoved) {
		t.Fatalf("takeover of a room never seen: %v, want errRoomMoved", err)
	}
}

// Of nodes claiming one room at once, one wins and every one is told the
// same holder: on one server, and on three with the bucket kept on all
// three (whose compare-and-set conflicts carry another error code).
func TestNATSRoomsOneClaimWins(t *testing.T) {
	for _, c := range []struct {
		name     string
		url      func(t *testing.T) string
		replicas int
	}{
		{"one server", func(t *testing.T) string { return testsupport.StartNATS(t) }, 1},
		{"three servers", func(t *testing.T) string { return testsupport.ClusterURL(testsupport.StartNATSCluster(t, 3)) }, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := c.url(t)
			stores := make([]*natsRooms, 6)
			for i := range stores {
				stores[i] = openNATSRooms(t, url, c.replicas)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			holders := make([]string, len(stores))
			errs := make([]error, len(stores))
			var wg sync.WaitGroup
			for i, s := range stores {
				wg.Go(func() {
					r, err := s.claim(ctx, "contested", fmt.Sprintf("n%d", i), NewEpoch)
					holders[i], errs[i] = r.holder, err
				})
			}
			wg.Wait()
			for i := range stores {
				if errs[i] != nil {
					t.Fatalf("node n%d's claim: %v", i, errs[i])
				}
				if holders[i] != holders[0] || holders[i] == "" {
					t.Fatalf("the claims were told different holders: %q", holders)
				}
			}
		})
	}
}
