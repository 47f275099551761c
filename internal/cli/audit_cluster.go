//go:build linux

package cli

import (
	"context"
	"io"

	"github.com/scalechat/scalechat/internal/bench"
)

// startLocalCluster starts audit --cluster's redis-server (a Redis Cluster
// when redisCluster) and n nodes of this binary; dir keeps their logs (""
// for a temporary folder); flags go to every node.
func startLocalCluster(ctx context.Context, redisCluster bool, dir string, n int, log io.Writer, flags ...string) (localCluster, error) {
	start := bench.StartLocalCluster
	if redisCluster {
		start = bench.StartLocalRedisCluster
	}
	cl, err := start(ctx, "", dir, n, log, flags...)
	if err != nil {
		return nil, err
	}
	return cl, nil
}
