package broker

import (
	"context"
	_ "embed" // the Lua scripts

	"github.com/redis/go-redis/v9"
)

// The Lua scripts Redis runs for the broker, one file each under lua/; each
// file's header says what its KEYS and ARGV are and what it returns. Redis
// runs a script at once, with no other command in between: a room's
// ownership (its holder key) changes hands, and its history is written,
// atomically.

var (
	//go:embed lua/persist.lua
	persistLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/takeover.lua
	takeoverLua string
	//go:embed lua/stream.lua
	streamLua string
	//go:embed lua/presence.lua
	presenceLua string
	//go:embed lua/handover.lua
	handoverLua string
	//go:embed lua/fill.lua
	fillLua string
)

var (
	// persistScript stores the messages an owning node ordered
	// (lua/persist.lua).
	persistScript = redis.NewScript(persistLua)
	// releaseScript gives up an owned room no other node follows
	// (lua/release.lua).
	releaseScript = redis.NewScript(releaseLua)
	// takeoverScript takes a room over from a holder whose lease is gone
	// (lua/takeover.lua).
	takeoverScript = redis.NewScript(takeoverLua)
	// streamScript checks, after an outage, that Redis still holds the
	// room's stream as this node knows it (lua/stream.lua).
	streamScript = redis.NewScript(streamLua)
	// presenceScript records and announces a node's connections of a user
	// in a room (lua/presence.lua).
	presenceScript = redis.NewScript(presenceLua)
	// handoverScript hands an owned room to a node that follows it
	// (lua/handover.lua).
	handoverScript = redis.NewScript(handoverLua)
	// fillScript writes what a follower held of a room whose owner is
	// gone and Redis lacks (lua/fill.lua).
	fillScript = redis.NewScript(fillLua)
)

// scripts are every script the broker runs: loadScripts loads them all into
// each Redis (each master of a cluster) before the node serves, so that a
// pipelined EVALSHA finds them.
var scripts = []*redis.Script{persistScript, releaseScript, takeoverScript, streamScript, presenceScript, handoverScript, fillScript}

// loadScripts loads every script into c.
func loadScripts(ctx context.Context, c redis.Scripter) error {
	for _, s := range scripts {
		if err := s.Load(ctx, c).Err(); err != nil {
			return err
		}
	}
	return nil
}
