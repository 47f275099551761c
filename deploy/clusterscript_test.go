//go:build linux

package deploy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/procstat"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestClusterScript runs scripts/cluster.sh up, uses the cluster through
// the printed HAProxy URL, and checks that down stops every process up
// started.
func TestClusterScript(t *testing.T) {
	testsupport.Need(t, "redis-server", "redis-server")
	testsupport.Need(t, "haproxy", "haproxy")
	runClusterScript(t, nil, []string{"redis"}, "REDIS_URL")
}

// TestClusterScriptNATS: SCALECHAT_CLUSTER_ENGINE=nats, on one NATS server
// and on a NATS cluster of three.
func TestClusterScriptNATS(t *testing.T) {
	for _, servers := range []int{1, 3} {
		t.Run(fmt.Sprintf("servers=%d", servers), func(t *testing.T) {
			env := []string{"SCALECHAT_CLUSTER_ENGINE=nats", fmt.Sprintf("SCALECHAT_CLUSTER_NATS_SERVERS=%d", servers)}
			checkNATSDryRun(t, env, servers)
			testsupport.Need(t, "haproxy", "haproxy")
			var pids []string
			for i := range servers {
				pids = append(pids, fmt.Sprintf("nats/nats%d", i+1))
			}
			runClusterScript(t, env, pids, "NATS_URL")
		})
	}
}

// TestClusterScriptDryRun: on Redis, the default, a dry run prints the
// launcher's command line and starts nothing.
func TestClusterScriptDryRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	out, err := clusterScript(t, dir, []string{"SCALECHAT_CLUSTER_DRY_RUN=1"}, "up", "2", "--", "--history", "50")
	if err != nil {
		t.Fatalf("cluster.sh up (dry run): %v\n%s", err, out)
	}
	want := fmt.Sprintf("+ %s/scalechat cluster up 2 --dir %s --haproxy-cfg %s -- --history 50\n", dir, dir, repoFile(t, "deploy/haproxy/haproxy.cfg"))
	if !strings.HasSuffix(out, want) {
		t.Errorf("dry run on Redis, want the last line %q:\n%s", want, out)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run made its state folder: %v", err)
	}
}

// clusterScript runs scripts/cluster.sh with args, its state in dir and
// env added to its environment.
func clusterScript(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, repoFile(t, "scripts/cluster.sh"), args...)
	cmd.Env = append(append(os.Environ(), "SCALECHAT_CLUSTER_DIR="+dir), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runClusterScript runs scripts/cluster.sh up with env (its engine), uses
// the cluster through the printed HAProxy URL, and checks that down stops
// every process up started: the engine's (pid files engine, relative to
// the state folder), two nodes and HAProxy. engineURL is the engine's
// variable in cluster.env.
func runClusterScript(t *testing.T, env, engine []string, engineURL string) {
	dir := t.TempDir()
	run := func(args ...string) (string, error) { return clusterScript(t, dir, env, args...) }
	t.Cleanup(func() { _, _ = run("down") })

	out, err := run("up", "2", "--", "--history", "50")
	if err != nil {
		t.Fatalf("cluster.sh up: %v\n%s", err, out)
	}
	vars := readEnvFile(t, filepath.Join(dir, "cluster.env"))
	for _, k := range []string{"LB_WS", "NODE1", "NODE2", engineURL} {
		if vars[k] == "" || !strings.Contains(out, strings.TrimPrefix(strings.TrimPrefix(vars[k], "http://"), "ws://")) {
			t.Errorf("%s=%q missing from cluster.env or from the printed URLs:\n%s", k, vars[k], out)
		}
	}
	pids := map[string]int{}
	for _, name := range append(slices.Clone(engine), "node1", "node2", "haproxy") {
		b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		pids[name] = pid
	}

	// A message through HAProxy, and its echo.
	conn, err := testsupport.DialWS(context.Background(), vars["LB_WS"]+"/script")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, _, _, err := conn.Joined(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := conn.Send("hi"); err != nil {
		t.Fatal(err)
	}
	if f, err := conn.Read(5 * time.Second); err != nil || f.Text != "hi" || f.Seq != 1 {
		t.Fatalf("echo through the script's cluster: %+v, %v", f, err)
	}

	if out, err := run("up", "2"); err == nil || !strings.Contains(out, "already runs") {
		t.Errorf("a second up: %v\n%s", err, out)
	}
	out, err = run("status")
	if err != nil || strings.Count(out, "running (pid") != len(pids) || strings.Count(out, "/readyz 200") != 2 {
		t.Errorf("status: %v\n%s", err, out)
	}

	if out, err := run("down"); err != nil {
		t.Fatalf("cluster.sh down: %v\n%s", err, out)
	}
	for name, pid := range pids {
		if running(pid) {
			t.Errorf("%s (pid %d) still runs after down", name, pid)
		}
	}
	if out, err := run("status"); err == nil {
		t.Errorf("status after down succeeded:\n%s", out)
	}
}

// checkNATSDryRun checks the commands of scripts/cluster.sh up 2 on NATS
// (env) without starting them: servers nats-server lines with JetStream on
// loopback ports below 22768 (on three, one NATS cluster routed to each
// other), the nodes on all of them with --nats in place of --redis (and
// --nats-replicas 3 on three), HAProxy in front of the nodes; nothing
// started. Then it runs the nats-server lines, as the script would, until
// JetStream answers.
func checkNATSDryRun(t *testing.T, env []string, servers int) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	out, err := clusterScript(t, dir, append(env, "SCALECHAT_CLUSTER_DRY_RUN=1"), "up", "2", "--", "--history", "50")
	if err != nil {
		t.Fatalf("cluster.sh up (dry run): %v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run made its state folder: %v", err)
	}
	var natsCmds, nodeCmds, lbCmds [][]string
	for _, line := range strings.Split(out, "\n") {
		f, ok := strings.CutPrefix(line, "+ ")
		if !ok {
			continue
		}
		args := strings.Fields(f)
		switch {
		case args[0] == "nats-server":
			natsCmds = append(natsCmds, args[1:])
		case args[0] == dir+"/scalechat" && len(args) > 1 && args[1] == "serve":
			nodeCmds = append(nodeCmds, args[2:])
		case args[0] == "env" && slices.Contains(args, "haproxy"):
			lbCmds = append(lbCmds, args[1:])
		}
	}
	if len(natsCmds) != servers || len(nodeCmds) != 2 || len(lbCmds) != 1 {
		t.Fatalf("dry run: %d nats-server, %d serve and %d haproxy commands, want %d, 2 and 1:\n%s", len(natsCmds), len(nodeCmds), len(lbCmds), servers, out)
	}

	ports := map[string]string{} // every port the script hands out, by what
	port := func(what, addr string) {
		p := addr[strings.LastIndexByte(addr, ':')+1:]
		if n, err := strconv.Atoi(p); err != nil || n < 1024 || n >= 22768 {
			t.Errorf("%s: port %q, want a free port below 22768", what, addr)
		}
		if prev, ok := ports[p]; ok {
			t.Errorf("%s and %s both on port %s", prev, what, p)
		}
		ports[p] = what
	}
	var urls, clusters, names, monitors []string
	for i, cmd := range natsCmds {
		what := fmt.Sprintf("nats-server %d", i+1)
		a := natsFlags(t, what, cmd)
		if a.value("-a") != "127.0.0.1" || !a.has("-js") || !strings.HasPrefix(a.value("-sd"), dir+"/nats/") {
			t.Errorf("%s: %q, want -a 127.0.0.1, -js and its store under %s/nats", what, cmd, dir)
		}
		port(what, a.value("-p"))
		port(what+" monitoring", a.value("-m"))
		urls = append(urls, "nats://127.0.0.1:"+a.value("-p"))
		monitors = append(monitors, "127.0.0.1:"+a.value("-m"))
		if servers == 1 {
			if a.has("--cluster", "--routes") {
				t.Errorf("%s: %q, a cluster of one", what, cmd)
			}
			continue
		}
		c := a.value("--cluster")
		if !strings.HasPrefix(c, "nats://127.0.0.1:") {
			t.Errorf("%s: --cluster %q, not on loopback", what, c)
		}
		port(what+" cluster", c)
		clusters = append(clusters, c)
		names = append(names, a.value("--server_name"))
		if a.value("--cluster_name") != "scalechat" {
			t.Errorf("%s: --cluster_name %q", what, a.value("--cluster_name"))
		}
	}
	if servers > 1 {
		for i, cmd := range natsCmds {
			if r := natsFlags(t, "nats-server", cmd).value("--routes"); r != strings.Join(clusters, ",") {
				t.Errorf("nats-server %d: --routes %q, want every server's %q", i+1, r, strings.Join(clusters, ","))
			}
		}
		if slices.Sort(names); len(slices.Compact(names)) != servers || names[0] == "" {
			t.Errorf("server names %q: JetStream needs one each", names)
		}
	}

	known := serveEnv(t)
	var nodes []string
	for i, cmd := range nodeCmds {
		what := fmt.Sprintf("node%d", i+1)
		flags := map[string]string{}
		for j := 0; j+1 < len(cmd); j += 2 {
			flag, v := cmd[j], cmd[j+1]
			flags[flag] = v
			switch twin := flagEnv(flag); {
			case known[twin]:
			case pendingEnv[twin] != "":
				t.Logf("%s: %s, not in this build yet", what, pendingEnv[twin])
			default:
				t.Errorf("%s: %s is no flag of serve (serve --help)", what, flag)
			}
		}
		if len(cmd)%2 != 0 {
			t.Errorf("%s: %q is not flag and value pairs", what, cmd)
		}
		port(what, flags["--addr"])
		port(what+" metrics", flags["--metrics-addr"])
		nodes = append(nodes, flags["--addr"])
		if _, ok := flags["--redis"]; ok {
			t.Errorf("%s: --redis on NATS", what)
		}
		if flags["--nats"] != strings.Join(urls, ",") {
			t.Errorf("%s: --nats %q, want every server's %q", what, flags["--nats"], strings.Join(urls, ","))
		}
		want := "" // the default, 1
		if servers == 3 {
			want = "3"
		}
		if flags["--nats-replicas"] != want {
			t.Errorf("%s: --nats-replicas %q, want %q with %d servers", what, flags["--nats-replicas"], want, servers)
		}
		if flags["--history"] != "50" || !strings.HasPrefix(cmd[0], "--addr") {
			t.Errorf("%s: %q, want the launcher's --addr first, up's serve flags (--history 50) passed on", what, cmd)
		}
	}

	lb, lbVars := lbCmds[0], haproxyEnv(t)
	vars := map[string]string{}
	for _, a := range lb {
		if k, v, ok := strings.Cut(a, "="); ok {
			vars[k] = v
			if !lbVars[k] {
				t.Errorf("haproxy: haproxy.cfg does not read %s", k)
			}
		}
	}
	port("haproxy", vars["LB_ADDR"])
	port("haproxy stats", vars["LB_STATS_ADDR"])
	for i, n := range nodes {
		if vars[fmt.Sprintf("LB_NODE%d", i+1)] != n {
			t.Errorf("haproxy: LB_NODE%d=%q, node%d on %s", i+1, vars[fmt.Sprintf("LB_NODE%d", i+1)], i+1, n)
		}
	}
	if want := []string{"haproxy", "-db", "-f", repoFile(t, "deploy/haproxy/haproxy.cfg")}; len(lb) < 4 || !slices.Equal(lb[len(lb)-4:], want) {
		t.Errorf("haproxy: %q, want %q", lb, want)
	}
	if t.Failed() {
		t.Logf("dry run:\n%s", out)
		return
	}

	// The NATS servers as the script starts them (their ports free a
	// moment ago): JetStream on, the three one cluster.
	if _, err := exec.LookPath("nats-server"); err != nil {
		t.Logf("nats-server is not installed: the script's nats-server lines are not run")
		return
	}
	var waits []func()
	for i, cmd := range natsCmds {
		waits = append(waits, runNATS(t, cmd, monitors[i]))
	}
	for _, wait := range waits {
		wait()
	}
}

// running says whether pid exists and is not a zombie: the script's
// processes are not our children, and init may not have reaped them yet.
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := procstat.Read(pid)
	return err == nil && st.State != 'Z'
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env
}
