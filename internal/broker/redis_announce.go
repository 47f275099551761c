package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// announceTTL is how long a node's announcement lives without a refresh.
const announceTTL = 10 * time.Second

// announcer holds the name and URL this node announces to the others, and
// wakes the loop that writes them when they change. Its lock is a leaf.
type announcer struct {
	self atomic.Pointer[[2]string] // name and URL; nil or "" name: not announced
	wake chan struct{}             // announce now
}

// set makes name and url the node's announcement, written at once.
func (a *announcer) set(name, url string) {
	a.self.Store(&[2]string{name, url})
	signal(a.wake)
}

// get returns the node's name and URL ("" name: not announced).
func (a *announcer) get() [2]string {
	if self := a.self.Load(); self != nil {
		return *self
	}
	return [2]string{}
}

// Announce implements Cluster: it makes this node known to the others as name, reachable at url
// (its metrics listener), refreshed every few seconds while Run runs.
func (b *Redis) Announce(name, url string) { b.ann.set(name, url) }

func (b *Redis) nodesKey() string { return b.cfg.Prefix + ":nodes" }

// announceLoop refreshes this node's announcement.
func (b *Redis) announceLoop(ctx context.Context) {
	t := time.NewTicker(announceTTL / 3)
	defer t.Stop()
	for {
		self := b.ann.get()
		if self[0] != "" && b.health.up.Load() {
			c, cancel := context.WithTimeout(ctx, time.Second)
			exp := strconv.FormatInt(time.Now().Add(announceTTL).Unix(), 10)
			if err := b.rdb.HSet(c, b.nodesKey(), self[0], exp+" "+self[1]).Err(); err != nil && ctx.Err() == nil {
				b.fail("announce", err)
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.ann.wake:
		}
	}
}

// Nodes implements Cluster: it returns the announced nodes whose announcement is alive: name to
// URL, this node included. Stale announcements are removed.
func (b *Redis) Nodes(ctx context.Context) (map[string]string, error) {
	all, err := b.rdb.HGetAll(ctx, b.nodesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("read cluster nodes: %w", err)
	}
	now := time.Now().Unix()
	nodes := make(map[string]string, len(all))
	var stale []string
	for name, v := range all {
		exp, url, ok := strings.Cut(v, " ")
		t, err := strconv.ParseInt(exp, 10, 64)
		if !ok || err != nil || t < now {
			stale = append(stale, name)
			continue
		}
		nodes[name] = url
	}
	if len(stale) > 0 {
		_ = b.rdb.HDel(ctx, b.nodesKey(), stale...).Err() // best effort: readers skip stale entries anyway
	}
	return nodes, nil
}
