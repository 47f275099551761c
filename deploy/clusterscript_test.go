//go:build linux

package deploy_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	script := repoFile(t, "scripts/cluster.sh")
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, args...)
		cmd.Env = append(os.Environ(), "SCALECHAT_CLUSTER_DIR="+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { _, _ = run("down") })

	out, err := run("up", "2", "--", "--history", "50")
	if err != nil {
		t.Fatalf("cluster.sh up: %v\n%s", err, out)
	}
	env := readEnvFile(t, filepath.Join(dir, "cluster.env"))
	for _, k := range []string{"LB_WS", "NODE1", "NODE2", "REDIS_URL"} {
		if env[k] == "" || !strings.Contains(out, strings.TrimPrefix(strings.TrimPrefix(env[k], "http://"), "ws://")) {
			t.Errorf("%s=%q missing from cluster.env or from the printed URLs:\n%s", k, env[k], out)
		}
	}
	pids := map[string]int{}
	for _, name := range []string{"redis", "node1", "node2", "haproxy"} {
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
	conn, err := testsupport.DialWS(context.Background(), env["LB_WS"]+"/script")
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
	if err != nil || strings.Count(out, "running (pid") != 4 || strings.Count(out, "/readyz 200") != 2 {
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
