package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// natsRooms is the NATS engine's record of each room's stream (docs/nats.md,
// step 4): who holds it (orders its messages), its epoch and the seq its
// next owner starts after, one key a room in a JetStream key/value bucket.
// On Redis these are the room's holder, epoch and seq keys, changed
// together by claim, handover.lua, release.lua and takeover.lua; here
// every change is one key's compare-and-set on the revision read, which
// is the fence: of two nodes changing a room from one revision, one
// succeeds and the other reads the room again.
type natsRooms struct {
	kv jetstream.KeyValue
}

// roomRecord is a room's stream as the bucket holds it.
type roomRecord struct {
	holder string // the node that orders the room; "" none (the next load claims it)
	epoch  string // the stream's epoch: a new one when seqs start again or messages were lost
	seq    uint64 // the seq the next owner's order starts after
	rev    uint64 // the key's revision read (0: no key yet)
}

// errRoomMoved: the room changed since it was read (another node won the
// compare-and-set), or is not held by the node that asked.
var errRoomMoved = errors.New("the room's holder changed meanwhile")

// newNATSRooms opens (or makes) the rooms' bucket, name, on js, kept on
// replicas servers.
func newNATSRooms(ctx context.Context, js jetstream.JetStream, name string, replicas int) (*natsRooms, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: name, History: 1, Replicas: replicas, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("open the rooms' bucket %s: %w", name, err)
	}
	return &natsRooms{kv: kv}, nil
}

// roomKey is room's key: a room's name may hold any character, a key only
// letters, digits and -/_=. (base64url has no others).
func roomKey(room string) string { return base64.RawURLEncoding.EncodeToString([]byte(room)) }

func (r roomRecord) encode() []byte {
	return []byte(r.holder + "\x1f" + r.epoch + "\x1f" + strconv.FormatUint(r.seq, 10))
}

func decodeRoomRecord(v []byte, rev uint64) (roomRecord, error) {
	parts := strings.Split(string(v), "\x1f")
	if len(parts) != 3 {
		return roomRecord{}, fmt.Errorf("a room's record %q is not holder, epoch and seq", v)
	}
	seq, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil {
		return roomRecord{}, fmt.Errorf("a room's record %q: %w", v, err)
	}
	return roomRecord{holder: parts[0], epoch: parts[1], seq: seq, rev: rev}, nil
}

// read returns room's record; rev 0 when it has none.
func (s *natsRooms) read(ctx context.Context, room string) (roomRecord, error) {
	e, err := s.kv.Get(ctx, roomKey(room))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return roomRecord{}, nil
	}
	if err != nil {
		return roomRecord{}, fmt.Errorf("read room %q: %w", room, err)
	}
	return decodeRoomRecord(e.Value(), e.Revision())
}

// write stores next as room's record if it is still at cur's revision.
func (s *natsRooms) write(ctx context.Context, room string, cur, next roomRecord) (roomRecord, error) {
	var rev uint64
	var err error
	if cur.rev == 0 {
		rev, err = s.kv.Create(ctx, roomKey(room), next.encode())
	} else {
		rev, err = s.kv.Update(ctx, roomKey(room), next.encode(), cur.rev)
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return roomRecord{}, errRoomMoved
	case err != nil:
		return roomRecord{}, fmt.Errorf("write room %q: %w", room, err)
	}
	next.rev = rev
	return next, nil
}

// claim makes node the room's holder when nobody holds it (a new room,
// one released, one taken over), keeping its epoch or, for a room never
// seen, starting one (newEpoch). It returns the record after: held by
// node, or by the node that held it or claimed it first.
func (s *natsRooms) claim(ctx context.Context, room, node string, newEpoch func() string) (roomRecord, error) {
	for {
		cur, err := s.read(ctx, room)
		if err != nil || cur.holder != "" {
			return cur, err
		}
		next := cur
		next.holder = node
		if next.epoch == "" {
			next.epoch = newEpoch()
		}
		got, err := s.write(ctx, room, cur, next)
		if errors.Is(err, errRoomMoved) {
			continue // another node changed it first: read who
		}
		return got, err
	}
}

// handOver moves the room from node, its holder, to to (to "": released,
// for the next load to claim), its order to start after seq at least:
// handover.lua and release.lua. errRoomMoved when node no longer holds
// it (taken over).
func (s *natsRooms) handOver(ctx context.Context, room, node, to string, seq uint64) error {
	for {
		cur, err := s.read(ctx, room)
		if err != nil {
			return err
		}
		if cur.holder != node {
			return errRoomMoved
		}
		next := cur
		next.holder = to
		next.seq = max(cur.seq, seq)
		if _, err := s.write(ctx, room, cur, next); !errors.Is(err, errRoomMoved) {
			return err
		}
	}
}

// takeOver ends the stream of a room whose holder, dead, is gone (its
// lease ended): a new epoch (newEpoch) and no holder, so that the next load
// claims it and its members resume with reset (takeover.lua). Nothing
// changes when the holder is no longer dead (errRoomMoved): another node
// took it over first, or it was handed on.
func (s *natsRooms) takeOver(ctx context.Context, room, dead string, newEpoch func() string) (roomRecord, error) {
	cur, err := s.read(ctx, room)
	if err != nil {
		return roomRecord{}, err
	}
	if cur.holder != dead || cur.rev == 0 {
		return cur, errRoomMoved
	}
	next := cur
	next.holder, next.epoch = "", newEpoch()
	return s.write(ctx, room, cur, next)
}
