//go:build linux

package cli

import (
	"context"
	"io"

	"github.com/scalechat/scalechat/internal/bench"
)

// startLocalCluster starts audit --cluster's redis-server and n nodes of
// this binary; dir keeps their logs ("" for a temporary folder).
func startLocalCluster(ctx context.Context, dir string, n int, log io.Writer) (localCluster, error) {
	cl, err := bench.StartLocalCluster(ctx, "", dir, n, log)
	if err != nil {
		return nil, err
	}
	return cl, nil
}
