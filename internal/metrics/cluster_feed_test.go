//go:build linux

package metrics

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestDashboardShowsEveryNodeOfTheCluster starts two nodes sharing a Redis
// and reads node a's dashboard feed until it carries samples of both.
func TestDashboardShowsEveryNodeOfTheCluster(t *testing.T) {
	redis := testsupport.StartRedis(t)
	withRedis := func(c *server.Config) { c.Redis = redis.URL() }
	a := startNode(t, withRedis, Options{Node: "node-a", Interval: 200 * time.Millisecond})
	b := startNode(t, withRedis, Options{Node: "node-b", Interval: 200 * time.Millisecond})
	a.srv.Announce("node-a", a.metricsURL())
	b.srv.Announce("node-b", b.metricsURL())

	resp, err := http.Get("http://" + a.metricsAddr + "/dashboard/feed")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var u Update
		if err := json.Unmarshal([]byte(line), &u); err != nil {
			t.Fatal(err)
		}
		var sampled []string
		for _, n := range u.Nodes {
			if n.Error == "" && len(n.Samples) > 0 {
				sampled = append(sampled, n.Node)
			}
		}
		slices.Sort(sampled)
		if slices.Equal(sampled, []string{"node-a", "node-b"}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the feed of node a samples %v, want both nodes", sampled)
		}
	}
	t.Fatalf("feed ended: %v", sc.Err())
}
