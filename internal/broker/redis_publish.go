package broker

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Publish implements Broker. It never blocks: the message is sent by
// the publishing goroutine in a pipeline with every other pending one, or,
// while Redis is down, delivered on this node alone at once.
func (b *Redis) Publish(p Publication) {
	if !b.up.Load() {
		// Under localMu, so that recovery knows when the last local
		// publish is done.
		b.localMu.RLock()
		if !b.up.Load() {
			b.local.Add(1)
			b.h.PublishLocal(p)
			b.localMu.RUnlock()
			return
		}
		b.localMu.RUnlock()
	}
	p.Prefix, p.Suffix = append([]byte(nil), p.Prefix...), append([]byte(nil), p.Suffix...)
	p.From = -1    // delivered from the broker's goroutine
	p.Target = nil // the room may be freed and made anew before a failed publish falls back to it
	b.pubMu.Lock()
	b.pending = append(b.pending, p)
	b.pubMu.Unlock()
	signal(b.pubWake)
}

// publishLoop sends pending publications to Redis, all at once in one
// pipeline per round.
func (b *Redis) publishLoop(ctx context.Context) {
	var batch []Publication
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.pubWake:
		}
		if b.recovering.Load() {
			continue // healthLoop wakes this loop when the rooms caught up
		}
		b.pubMu.Lock()
		batch, b.pending = b.pending, batch[:0]
		b.pubMu.Unlock()
		switch {
		case len(batch) == 0:
		case b.up.Load():
			b.send(ctx, batch)
		default: // queued while the node recovered, which failed
			for _, m := range batch {
				b.local.Add(1)
				b.h.PublishLocal(m)
			}
		}
		clear(batch)
	}
}

func (b *Redis) send(ctx context.Context, batch []Publication) {
	hist := strconv.Itoa(b.cfg.History)
	ttl := strconv.Itoa(int(b.cfg.TTL / time.Second))
	mode := b.publishMode()
	cmds, _ := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range batch {
			publishScript.EvalSha(ctx, p, []string{b.seqKey(m.Room), b.historyKey(m.Room), b.epochKey(m.Room)},
				m.Prefix, m.Suffix, hist, ttl, b.channel(m.Room), mode)
		}
		return nil
	})
	var retry []Publication
	for i, c := range cmds {
		err := c.Err()
		switch {
		case err == nil:
			b.published.Add(1)
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			retry = append(retry, batch[i])
		default:
			// Redis is gone, or refused: keep the conversation going here.
			b.fail("publish", err)
			b.local.Add(1)
			b.h.PublishLocal(batch[i])
		}
	}
	for _, m := range retry { // Redis restarted and forgot the script
		err := publishScript.Run(ctx, b.rdb, []string{b.seqKey(m.Room), b.historyKey(m.Room), b.epochKey(m.Room)},
			m.Prefix, m.Suffix, hist, ttl, b.channel(m.Room), mode).Err()
		if err != nil {
			b.fail("publish", err)
			b.local.Add(1)
			b.h.PublishLocal(m)
			continue
		}
		b.published.Add(1)
	}
}

// publishMode is the publish script's last argument: "s" publishes on a
// shard channel (SPUBLISH), which only a Redis Cluster needs.
func (b *Redis) publishMode() string {
	if b.cluster != nil {
		return "s"
	}
	return "-"
}

// flushLocal delivers locally what was still waiting for Redis at shutdown.
func (b *Redis) flushLocal() {
	b.pubMu.Lock()
	batch := b.pending
	b.pending = nil
	b.pubMu.Unlock()
	for _, m := range batch {
		b.h.PublishLocal(m)
	}
}
