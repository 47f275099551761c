package broker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// IsClusterURL reports whether u names a Redis Cluster (redis-cluster://):
// for the other packages that keep state in the nodes' Redis (the
// webhooks, internal/webhook).
func IsClusterURL(u string) bool { return isClusterURL(u) }

// ParseClusterURL returns the options of a redis-cluster:// URL, as the
// broker reads it.
func ParseClusterURL(u string) (*redis.ClusterOptions, error) { return parseClusterURL(u) }

// sleepCtx waits for d or ctx; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
