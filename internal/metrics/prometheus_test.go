//go:build linux

package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// repoFile returns the path of a file of the repository, from this package.
func repoFile(t testing.TB, rel string) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Join(filepath.Dir(self), "..", "..", rel)
}

// prometheusTool returns the path of a Prometheus binary (prometheus or
// promtool), skipping the test when it is missing, unless CI is set: CI
// installs the Debian package prometheus.
func prometheusTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (apt-get install prometheus)", name)
		}
		t.Skipf("%s is not installed (apt-get install prometheus)", name)
	}
	return p
}

func TestShippedPrometheusConfigIsValid(t *testing.T) {
	promtool := prometheusTool(t, "promtool")
	out, err := exec.Command(promtool, "check", "config", repoFile(t, "deploy/prometheus/prometheus.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// grafanaExprs returns every PromQL expression of the shipped Grafana
// dashboard, panels' targets and template variables' queries.
func grafanaExprs(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "deploy/grafana/dashboards/scalechat.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)
	if len(exprs) < 10 {
		t.Fatalf("only %d expressions found in the dashboard", len(exprs))
	}
	return exprs
}

// metricNames returns the metric names an expression uses.
var metricName = regexp.MustCompile(`\b(?:scalechat|process|go)_[a-z0-9_]+\b`)

// clusterOnly are the series a node exposes only with a broker.
var clusterOnly = map[string]bool{
	"scalechat_broker_up": true, "scalechat_broker_errors_total": true, "scalechat_broker_local_messages_total": true,
	"scalechat_broker_gap_fills_total": true, "scalechat_broker_unrecovered_total": true,
	"scalechat_broker_reconnects_total": true, "scalechat_broker_rooms": true,
}

func TestGrafanaDashboardMetricsExist(t *testing.T) {
	// A node of a cluster exposes every series, the broker's included.
	redis := testsupport.StartRedis(t)
	n := startNode(t, func(c *server.Config) { c.Redis = redis.URL() }, Options{})
	families := n.scrape(t)
	for name := range clusterOnly {
		if families[name] == nil {
			t.Errorf("a cluster node lacks %s", name)
		}
	}
	used := map[string]bool{}
	for _, e := range grafanaExprs(t) {
		for _, name := range metricName.FindAllString(e, -1) {
			used[name] = true
		}
	}
	var missing []string
	for name := range used {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && families[b] != nil && families[b].GetType().String() == "HISTOGRAM" {
				base = b
			}
		}
		if families[base] == nil {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the Grafana dashboard uses metrics /metrics lacks: %v", missing)
	}
	// Every scalechat series is on the dashboard.
	for name := range families {
		if strings.HasPrefix(name, "scalechat_") && !used[name] && !used[name+"_bucket"] {
			t.Errorf("%s is not on the Grafana dashboard", name)
		}
	}
}

// promQuery runs an instant query against a Prometheus HTTP API.
func promQuery(ctx context.Context, api, query string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("query %s: %w: %s", query, err, b)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", query, r.Error)
	}
	return r.Data.Result, nil
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [unix seconds, "value"]
}

func (s promSample) value() string { v, _ := s.Value[1].(string); return v }

// TestPrometheusScrapesANode runs a real Prometheus against a running node
// and reads the node's counters back through Prometheus' query API; then it
// runs every query of the Grafana dashboard there.
func TestPrometheusScrapesANode(t *testing.T) {
	prom := prometheusTool(t, "prometheus")
	// A node of a cluster, so that the broker's series are there too.
	redis := testsupport.StartRedis(t)
	n := startNode(t, func(c *server.Config) { c.Redis = redis.URL() }, Options{})
	for deadline := time.Now().Add(20 * time.Second); value(n.scrape(t), "scalechat_broker_up", "") != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the broker never came up")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Known traffic: 5 messages in a room of 2 on the two loops.
	a, b := join(t, n.chatAddr, "p"), join(t, n.chatAddr, "p")
	for i := range 5 {
		a.sendText(fmt.Sprintf(`{"text":"%d"}`, i))
		a.next()
		b.next()
	}

	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: scalechat
    static_configs:
      - targets: [%q]
`, n.metricsAddr)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testsupport.FreeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.Command(prom,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	api := "http://" + addr

	// Poll the API until Prometheus has scraped the node (or died).
	var last string
	ok := false
	for !ok {
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, log.String())
		case <-ctx.Done():
			t.Fatalf("prometheus never returned the node's counters; last answer %s\n%s", last, log.String())
		case <-time.After(200 * time.Millisecond):
		}
		res, err := promQuery(ctx, api, `scalechat_messages_received_total{job="scalechat"}`)
		if err != nil {
			last = err.Error()
			continue
		}
		last = fmt.Sprint(res)
		ok = len(res) == 1 && res[0].value() == "5" && res[0].Metric["instance"] == n.metricsAddr
	}
	tests := []struct{ query, want string }{
		{`up{job="scalechat"}`, "1"},
		{`scalechat_messages_delivered_total`, "10"},
		{`scalechat_connections`, "2"},
		{`scalechat_rooms`, "1"},
		{`scalechat_message_processing_seconds_count`, "10"},
		// The room's members are all on the node: after the first, its
		// messages are ordered there, without a Redis round trip.
		{`scalechat_broker_messages_published_total + scalechat_broker_owned_messages_total`, "5"},
		{`scalechat_broker_up`, "1"},
		{`count(scalechat_disconnects_total)`, "14"}, // 13 codes and "other"
	}
	for _, tt := range tests {
		res, err := promQuery(ctx, api, tt.query)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || res[0].value() != tt.want {
			t.Errorf("%s = %v, want %s", tt.query, res, tt.want)
		}
	}

	// The dashboard's queries are valid PromQL and find the node, once
	// Prometheus has the two scrapes a rate needs.
	for {
		res, err := promQuery(ctx, api, `rate(scalechat_messages_received_total[1m])`)
		if err == nil && len(res) == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no rate after a minute: %v %v", res, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, e := range grafanaExprs(t) {
		q := strings.NewReplacer("$__rate_interval", "1m", "$instance", ".*").Replace(e)
		if strings.HasPrefix(q, "label_values(") {
			// A Grafana function: check the selector inside it.
			q = strings.TrimPrefix(q, "label_values(")
			q = q[:strings.LastIndex(q, ",")]
		}
		res, err := promQuery(ctx, api, q)
		if err != nil {
			t.Errorf("dashboard query: %v", err)
			continue
		}
		if len(res) == 0 {
			t.Errorf("dashboard query %s finds nothing", q)
		}
	}
}
