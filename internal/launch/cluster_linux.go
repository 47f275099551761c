package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scalechat/scalechat/internal/procstat"
)

// A detached local cluster (scalechat cluster, scripts/cluster.sh): a
// redis-server, N scalechat nodes and, given its configuration, HAProxy in
// front, each in its own session so that they outlive the command that
// started them. Its folder holds NAME.pid and NAME.log of each, and
// cluster.env with the URLs; Down and Status read it.

// ClusterOptions configure Up.
type ClusterOptions struct {
	Dir   string   // state: pids, logs, cluster.env
	Exe   string   // the scalechat binary
	Nodes int      // 1 to 8 (deploy/haproxy/haproxy.cfg names 8)
	Flags []string // serve flags of every node, after the launcher's
	// HAProxyCfg is deploy/haproxy/haproxy.cfg, configured by the
	// LB_* variables; "": no load balancer.
	HAProxyCfg string
	Out        io.Writer // what runs where
}

// EnvFile is the cluster folder's file of URLs, KEY=value lines.
const EnvFile = "cluster.env"

// ErrRunning is Up's error when a cluster already runs from its folder.
var ErrRunning = errors.New("a cluster already runs")

// Up starts the cluster and writes its folder. A cluster already running
// from the folder is an error; what it started before failing keeps
// running, for Down.
func Up(ctx context.Context, opt ClusterOptions) error {
	if opt.Nodes < 1 || opt.Nodes > 8 {
		return fmt.Errorf("nodes must be 1 to 8 (haproxy.cfg names 8), not %d", opt.Nodes)
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", opt.Dir, err)
	}
	for _, name := range started(opt.Dir) {
		if pid, ok := pidOf(opt.Dir, name); ok && running(pid) {
			return fmt.Errorf("%w from %s: scalechat cluster down first", ErrRunning, opt.Dir)
		}
		_ = os.Remove(filepath.Join(opt.Dir, name+".pid"))
	}
	var env []string
	raddr, err := FreeAddr()
	if err != nil {
		return err
	}
	rport, _ := strconv.Atoi(raddr[strings.LastIndexByte(raddr, ':')+1:])
	pid, err := spawn(opt.Dir, "redis", nil, "redis-server", RedisArgs(rport, opt.Dir)...)
	if err != nil {
		return err
	}
	if err := WaitRedis(ctx, raddr, alive("redis", pid, opt.Dir), 10*time.Second); err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}
	env = append(env, "REDIS_URL="+RedisURL(raddr))
	nodes, metrics := make([]string, opt.Nodes), make([]string, opt.Nodes)
	for i := range opt.Nodes {
		if nodes[i], err = FreeAddr(); err != nil {
			return err
		}
		if metrics[i], err = FreeAddr(); err != nil {
			return err
		}
		name := fmt.Sprintf("node%d", i+1)
		flags := append([]string{"--metrics-addr", metrics[i], "--redis", RedisURL(raddr)}, opt.Flags...)
		pid, err := spawn(opt.Dir, name, nil, opt.Exe, ServeArgs(nodes[i], flags...)...)
		if err != nil {
			return err
		}
		if err := WaitHTTP(ctx, "http://"+nodes[i]+"/readyz", alive(name, pid, opt.Dir), 15*time.Second); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	for i := range opt.Nodes {
		env = append(env, fmt.Sprintf("NODE%d=http://%s/", i+1, nodes[i]))
	}
	for i := range opt.Nodes {
		env = append(env, fmt.Sprintf("NODE%d_METRICS=http://%s/metrics", i+1, metrics[i]))
	}
	lb, stats := "", ""
	if opt.HAProxyCfg != "" {
		if lb, stats, err = upHAProxy(ctx, opt, nodes); err != nil {
			return err
		}
		env = append([]string{"LB_URL=http://" + lb + "/", "LB_WS=ws://" + lb + "/ws", "LB_STATS=http://" + stats + "/stats"}, env...)
	}
	if err := os.WriteFile(filepath.Join(opt.Dir, EnvFile), []byte(strings.Join(env, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	printUp(opt, lb, stats, raddr, nodes, metrics)
	return nil
}

// upHAProxy starts HAProxy with opt.HAProxyCfg in front of nodes, once
// haproxy -c accepts it, and waits until it answers.
func upHAProxy(ctx context.Context, opt ClusterOptions, nodes []string) (lb, stats string, err error) {
	if lb, err = FreeAddr(); err != nil {
		return "", "", err
	}
	if stats, err = FreeAddr(); err != nil {
		return "", "", err
	}
	env := []string{"LB_ADDR=" + lb, "LB_STATS_ADDR=" + stats}
	for i, n := range nodes {
		env = append(env, fmt.Sprintf("LB_NODE%d=%s", i+1, n))
	}
	check := exec.CommandContext(ctx, "haproxy", "-c", "-q", "-f", opt.HAProxyCfg)
	check.Env = append(os.Environ(), env...)
	if out, err := check.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("haproxy rejects %s: %w\n%s", opt.HAProxyCfg, err, out)
	}
	pid, err := spawn(opt.Dir, "haproxy", env, "haproxy", "-db", "-f", opt.HAProxyCfg)
	if err != nil {
		return "", "", err
	}
	if err := WaitHTTP(ctx, "http://"+lb+"/readyz", alive("haproxy", pid, opt.Dir), 10*time.Second); err != nil {
		return "", "", fmt.Errorf("haproxy: %w", err)
	}
	return lb, stats, nil
}

func printUp(opt ClusterOptions, lb, stats, redis string, nodes, metrics []string) {
	w := opt.Out
	fmt.Fprintf(w, "\nscalechat cluster of %d nodes is up\n", len(nodes))
	if lb != "" {
		fmt.Fprintf(w, "  chat (haproxy)   http://%s/      ws://%s/ws/{room}\n", lb, lb)
		fmt.Fprintf(w, "  haproxy stats    http://%s/stats\n", stats)
	}
	for i := range nodes {
		fmt.Fprintf(w, "  node%d            http://%s/   dashboard http://%s/dashboard\n", i+1, nodes[i], metrics[i])
	}
	fmt.Fprintf(w, "  redis            %s\n", RedisURL(redis))
	fmt.Fprintf(w, "  state and logs   %s (URLs in %s)\n", opt.Dir, EnvFile)
	target := "ws://" + nodes[0] + "/ws"
	if lb != "" {
		target = "ws://" + lb + "/ws"
	}
	fmt.Fprintf(w, "  try              %s loadtest --url %s --rooms 10 --room-size 10 --duration 10s\n", opt.Exe, target)
	fmt.Fprintf(w, "  stop             scalechat cluster down --dir %s\n", opt.Dir)
}

// spawn starts prog in its own session (it outlives this process), its
// output in dir/NAME.log and its pid in dir/NAME.pid.
func spawn(dir, name string, env []string, prog string, args ...string) (int, error) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return 0, err
	}
	defer log.Close()
	cmd := exec.Command(prog, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	if err := os.WriteFile(filepath.Join(dir, name+".pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return 0, err
	}
	return pid, nil
}

// alive is a wait's check that a spawned process still runs.
func alive(name string, pid int, dir string) func() error {
	return func() error {
		if running(pid) {
			return nil
		}
		return fmt.Errorf("%s exited at start; see %s", name, filepath.Join(dir, name+".log"))
	}
}

// running says whether pid exists and is not a zombie (a process this one
// spawned and did not wait for is one until this one exits).
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := procstat.Read(pid)
	return err == nil && st.State != 'Z'
}

// started are the names of the processes the folder holds a pid of.
func started(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".pid"))
	}
	sort.Strings(out)
	return out
}

func pidOf(dir, name string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// Down stops what Up started: the balancer first, so that no client is
// sent to a stopping node, Redis last; each with SIGTERM (a node drains),
// SIGKILL after 15 s.
func Down(dir string, w io.Writer) error {
	if _, err := os.Stat(dir); err != nil {
		fmt.Fprintf(w, "no cluster state in %s\n", dir)
		return nil
	}
	names := started(dir)
	sort.SliceStable(names, func(i, j int) bool { return downOrder(names[i]) < downOrder(names[j]) })
	for _, name := range names {
		stop(dir, name, w)
	}
	_ = os.Remove(filepath.Join(dir, EnvFile))
	fmt.Fprintf(w, "cluster down (logs kept in %s)\n", dir)
	return nil
}

func downOrder(name string) int {
	switch {
	case name == "haproxy":
		return 0
	case name == "redis":
		return 2
	}
	return 1
}

func stop(dir, name string, w io.Writer) {
	pid, ok := pidOf(dir, name)
	if ok && running(pid) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(15 * time.Second)
		for running(pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond) // not our child: nothing to wait on
		}
		if running(pid) {
			fmt.Fprintf(w, "cluster: %s (pid %d) ignored SIGTERM for 15s: killing it\n", name, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		fmt.Fprintf(w, "stopped %s (pid %d)\n", name, pid)
	}
	_ = os.Remove(filepath.Join(dir, name+".pid"))
}

// ErrNothing is Status's error when the folder holds no cluster.
var ErrNothing = errors.New("no cluster")

// Status writes what runs from dir, each node's /readyz answer, and the
// URLs; ErrNothing when nothing was started from it.
func Status(dir string, w io.Writer) error {
	names := started(dir)
	if len(names) == 0 {
		fmt.Fprintf(w, "nothing started from %s\n", dir)
		return ErrNothing
	}
	env, _ := os.ReadFile(filepath.Join(dir, EnvFile))
	for _, name := range names {
		pid, _ := pidOf(dir, name)
		if !running(pid) {
			fmt.Fprintf(w, "%-8s not running (see %s)\n", name, filepath.Join(dir, name+".log"))
			continue
		}
		fmt.Fprintf(w, "%-8s running (pid %d)", name, pid)
		if url := envValue(string(env), strings.ToUpper(name)); strings.HasPrefix(name, "node") && url != "" {
			fmt.Fprintf(w, "  /readyz %s", readyz(url))
		}
		fmt.Fprintln(w)
	}
	_, err := w.Write(env)
	return err
}

func envValue(env, key string) string {
	for _, line := range strings.Split(env, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// readyz is the HTTP status of a node's /readyz, or "-" when it does not
// answer.
func readyz(base string) string {
	err := WaitHTTP(context.Background(), strings.TrimSuffix(base, "/")+"/readyz", nil, 0)
	if err != nil {
		return "-"
	}
	return "200"
}
