package cli

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestTsungScenario runs scenarios/tsung.xml, the Tsung scenario of
// docs/loadtest.md ("Other load testers"), against `scalechat serve` as
// shipped: Tsung's five-field users (about 20) must each get both their messages
// back, the binary one (Tsung's default frame) and the text one, with no
// error. About 10 s; skipped when tsung is not installed (CI installs it).
func TestTsungScenario(t *testing.T) {
	tsung := testsupport.Need(t, "tsung", "tsung")
	root, err := testsupport.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	scenario, err := os.ReadFile(filepath.Join(root, "scenarios", "tsung.xml"))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testsupport.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	node := testsupport.StartNode(t, bin, "scalechat")
	_, port, _ := net.SplitHostPort(node.Addr)
	const shipped = `port="8080"` // scalechat serve's default address
	if strings.Count(string(scenario), shipped) != 1 {
		t.Fatalf("scenarios/tsung.xml does not name the server's port once as %s", shipped)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "tsung.xml")
	if err := os.WriteFile(file, []byte(strings.Replace(string(scenario), shipped, `port="`+port+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tsung, "-f", file, "-l", filepath.Join(dir, "log"), "-n", "start")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "HOME="+dir) // Tsung writes ~/.tsung
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsung: %v\n%s", err, out)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "log", "*", "tsung.log"))
	if len(logs) != 1 {
		t.Fatalf("tsung wrote %d tsung.log, want 1", len(logs))
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	stats := tsungTotals(string(b))
	// Tsung draws its arrivals at random: about 20 users, each of whom
	// must have ended well.
	users := stats["users_count"]
	if users < 10 {
		t.Errorf("tsung started %d users, want about 20", users)
	}
	for name, want := range map[string]int{"finish_users_count": users, "websocket_succ": users, "match": 2 * users} {
		if stats[name] != want {
			t.Errorf("tsung counted %s %d, want %d (of %d users)", name, stats[name], want, users)
		}
	}
	for name, n := range stats {
		if name == "nomatch" || name == "match_stop" || strings.HasPrefix(name, "error") || strings.HasSuffix(name, "_fail") {
			t.Errorf("tsung counted %s %d, want none", name, n)
		}
	}
	if t.Failed() {
		t.Logf("tsung.log:\n%s", b)
	}
}

// tsungTotals reads the last total of each counter of a tsung.log
// ("stats: NAME LAST TOTAL"; samples have more fields and are skipped).
func tsungTotals(log string) map[string]int {
	totals := map[string]int{}
	for line := range strings.Lines(log) {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "stats:" {
			continue
		}
		if n, err := strconv.Atoi(f[3]); err == nil {
			totals[f[1]] = n
		}
	}
	return totals
}
