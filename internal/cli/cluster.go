//go:build linux

package cli

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/scalechat/scalechat/internal/launch"
)

// defaultClusterDir is where scalechat cluster keeps its state unless
// --dir or SCALECHAT_CLUSTER_DIR says otherwise.
func defaultClusterDir() string {
	return cmp.Or(os.Getenv("SCALECHAT_CLUSTER_DIR"), filepath.Join(os.TempDir(), "scalechat-cluster"))
}

func newClusterCmd() *cobra.Command {
	dir := defaultClusterDir()
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Start, inspect and stop a local cluster: redis-server, N nodes and HAProxy on loopback",
		Long: `cluster runs a scalechat cluster on this machine, its processes detached from the
command: a redis-server, N scalechat serve nodes sharing it, and with --haproxy-cfg HAProxy
in front of them (deploy/haproxy/haproxy.cfg), each on a free loopback port. The folder
(--dir, or $SCALECHAT_CLUSTER_DIR, default $TMPDIR/scalechat-cluster) holds each process's
pid and log and cluster.env with the URLs; status and down read it. scripts/cluster.sh
builds the binary and runs it with the repository's haproxy.cfg. The bench and the tests
start their servers with the same launcher (internal/launch).`,
		Example: `  scalechat cluster up 3 --haproxy-cfg deploy/haproxy/haproxy.cfg -- --history 500
  scalechat cluster status
  scalechat cluster down`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", dir, "state folder: pids, logs, cluster.env")
	var cfg string
	up := &cobra.Command{
		Use:   "up [N] [-- serve flags...]",
		Short: "Start redis-server, N nodes (default 3, at most 8) and, with --haproxy-cfg, HAProxy",
		RunE: func(c *cobra.Command, args []string) error {
			n, flags, err := upArgs(args, c.ArgsLenAtDash())
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			err = launch.Up(c.Context(), launch.ClusterOptions{Dir: dir, Exe: exe, Nodes: n, Flags: flags, HAProxyCfg: cfg, Out: c.OutOrStdout()})
			if err != nil && !errors.Is(err, launch.ErrRunning) {
				return fmt.Errorf("%w (scalechat cluster down --dir %s stops what did start)", err, dir)
			}
			return err
		},
	}
	up.Flags().StringVar(&cfg, "haproxy-cfg", "", "HAProxy in front of the nodes with this configuration (deploy/haproxy/haproxy.cfg); none without")
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop what up started (HAProxy, the nodes, Redis; logs kept)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return launch.Down(dir, c.OutOrStdout()) },
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "What runs, each node's /readyz, and the URLs; exit code 1 when nothing was started",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			err := launch.Status(dir, c.OutOrStdout())
			if errors.Is(err, launch.ErrNothing) {
				return &exitError{code: exitFailed, err: err}
			}
			return err
		},
	}
	cmd.AddCommand(up, down, status)
	return cmd
}

// upArgs reads up's arguments: N before "--", serve's flags after.
func upArgs(args []string, dash int) (int, []string, error) {
	before, after := args, []string(nil)
	if dash >= 0 {
		before, after = args[:dash], args[dash:]
	}
	switch len(before) {
	case 0:
		return 3, after, nil
	case 1:
		n, err := strconv.Atoi(before[0])
		if err != nil || n < 1 || n > 8 {
			return 0, nil, fmt.Errorf("the number of nodes must be 1 to 8 (haproxy.cfg names 8), got %q", before[0])
		}
		return n, after, nil
	}
	return 0, nil, fmt.Errorf("up takes N and, after --, serve's flags; got %q (put serve's flags after --)", before)
}
