//go:build linux

package cli

import (
	"context"
	"io"

	"github.com/scalechat/scalechat/internal/bench"
)

// startLocalCluster starts audit --cluster's engine (one redis-server, a
// Redis Cluster, one nats-server or a NATS cluster of three) and n nodes
// of this binary on it; dir keeps their logs ("" for a temporary folder);
// flags go to every node.
func startLocalCluster(ctx context.Context, eng clusterEngine, dir string, n int, log io.Writer, flags ...string) (localCluster, error) {
	start := bench.StartLocalCluster
	switch eng {
	case engineRedisCluster:
		start = bench.StartLocalRedisCluster
	case engineNATS:
		start = bench.StartLocalNATS
	case engineNATSCluster:
		start = bench.StartLocalNATSCluster
	}
	cl, err := start(ctx, "", dir, n, log, flags...)
	if err != nil {
		return nil, err
	}
	return cl, nil
}
