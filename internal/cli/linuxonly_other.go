//go:build !linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// The server, the load tester (its clients run on event loops) and the
// bench (which runs both) are built on epoll. On other systems their
// commands are only this answer, and so is audit --cluster (its nodes are
// scalechat serve); chat, analyze, report, audit against a server, token
// and version work as on Linux.

func newServeCmd() *cobra.Command { return linuxOnly("serve", "Run the chat server") }

func newLoadtestCmd() *cobra.Command {
	return linuxOnly("loadtest", "Simulate thousands of chat clients and record every message sent and received")
}

func newBenchCmd() *cobra.Command {
	return linuxOnly("bench", "Run the fixed benchmark scenarios and print one table of results")
}

func newClusterCmd() *cobra.Command {
	return linuxOnly("cluster", "Start, inspect and stop a local cluster: redis-server, N nodes and HAProxy on loopback")
}

// linuxOnly is a command that says it needs Linux, whatever its arguments.
func linuxOnly(name, short string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              short + " (Linux only)",
		DisableFlagParsing: true, // its flags exist on Linux only: every call gets the one answer
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("scalechat %s needs Linux: it is built on epoll event loops", name)
		},
	}
}

func startLocalCluster(context.Context, clusterEngine, string, int, io.Writer, ...string) (localCluster, error) {
	return nil, errors.New("audit --cluster needs Linux: its nodes run scalechat serve")
}
