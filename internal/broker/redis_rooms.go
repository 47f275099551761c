package broker

import (
	"strconv"
	"time"
)

// RoomConfig is what a room's keys in Redis take from the room's namespace:
// how many messages its history stream keeps and how long its keys live
// without messages.
type RoomConfig struct {
	History int           // messages kept in the room's stream; 0 keeps none
	TTL     time.Duration // the room's keys expire after this long without messages; 0: Config.TTL
}

// roomConfig resolves the history size and TTL of a room: Config.Room's
// answer, or the broker's own without it.
func (b *Redis) roomConfig(room string) RoomConfig {
	if b.cfg.Room == nil {
		return RoomConfig{History: b.cfg.History, TTL: b.cfg.TTL}
	}
	rc := b.cfg.Room(room)
	if rc.TTL <= 0 {
		rc.TTL = b.cfg.TTL
	}
	return rc
}

// roomConfigOf returns the room's RoomConfig as resolved when it was
// subscribed, or resolves it for a room that is not (the server API may
// publish into a room no member here joined).
func (b *Redis) roomConfigOf(room string) RoomConfig {
	if rc, ok := b.sub.config(room); ok {
		return rc
	}
	return b.roomConfig(room)
}

// ttlArg is a TTL as the scripts take it: whole seconds.
func ttlArg(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// renewInterval is how often, at most, a node's publishes renew the TTLs
// in Redis of a room whose TTL is ttl, to the TTL and one renewInterval
// more: the room's keys then live at least the TTL after its last message,
// and at most ¼ longer.
func renewInterval(ttl time.Duration) time.Duration { return ttl / 4 }
