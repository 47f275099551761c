//go:build linux

package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// pendingEnv are variables the deployment files set for flags being added
// on other branches: accepted while this build does not know them (the
// server ignores unknown variables), checked like the others once it does.
var pendingEnv = map[string]string{
	"SCALECHAT_METRICS_ADDR":  "--metrics-addr (Prometheus metrics listener, branch metrics)",
	"SCALECHAT_NATS":          "--nats (the NATS cluster engine, in progress: docs/nats.md)",
	"SCALECHAT_NATS_REPLICAS": "--nats-replicas (the NATS cluster engine, in progress: docs/nats.md)",
}

// flagEnv is the environment twin of a serve flag: --nats-replicas is
// SCALECHAT_NATS_REPLICAS (internal/cli's envName).
func flagEnv(flag string) string {
	return "SCALECHAT_" + strings.ToUpper(strings.ReplaceAll(strings.TrimLeft(flag, "-"), "-", "_"))
}

// serveEnv returns the environment twins of every flag of the built
// binary's serve command, read from its --help.
func serveEnv(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("scalechat serve --help: %v\n%s", err, out)
	}
	env := map[string]bool{}
	for _, m := range regexp.MustCompile(`\(env (SCALECHAT_[A-Z0-9_]+)\)`).FindAllStringSubmatch(string(out), -1) {
		env[m[1]] = true
	}
	if !env["SCALECHAT_ADDR"] || !env["SCALECHAT_REDIS"] {
		t.Fatalf("serve --help names no SCALECHAT_ADDR or SCALECHAT_REDIS:\n%s", out)
	}
	return env
}

// checkServeEnv checks that every SCALECHAT_ variable of env is a flag's
// twin.
func checkServeEnv(t *testing.T, where string, known map[string]bool, env map[string]string) {
	t.Helper()
	if len(env) == 0 {
		t.Errorf("%s: no environment", where)
	}
	referenced := func(name string) bool { // a helper variable, as Kubernetes' $(POD_IP)
		for _, v := range env {
			if strings.Contains(v, "$("+name+")") {
				return true
			}
		}
		return false
	}
	for name := range env {
		switch {
		case known[name]:
		case !strings.HasPrefix(name, "SCALECHAT_") && referenced(name):
		case pendingEnv[name] != "":
			t.Logf("%s: %s is for %s, not in this build yet", where, name, pendingEnv[name])
		default:
			t.Errorf("%s: %s is no flag's environment variable (serve --help)", where, name)
		}
	}
}

// portOf returns the port of a host:port value.
func portOf(t *testing.T, where, hostport string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("%s: %q is not host:port: %v", where, hostport, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s: port of %q: %v", where, hostport, err)
	}
	return n
}

// haproxyEnv returns the environment variables deploy/haproxy/haproxy.cfg
// reads.
func haproxyEnv(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "deploy/haproxy/haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{(LB_[A-Z0-9_]+)|defined\((LB_[A-Z0-9_]+)\)`).FindAllStringSubmatch(string(b), -1) {
		vars[m[1]+m[2]] = true
	}
	return vars
}

// probeNode starts a node with a container's environment (its listen
// addresses moved to free loopback ports) and checks that every probe path
// answers 200. It proves the values parse and the paths exist.
func probeNode(t *testing.T, where string, env map[string]string, paths ...string) {
	t.Helper()
	var kv []string
	for k, v := range env {
		if k == "SCALECHAT_METRICS_ADDR" {
			v = testsupport.FreeAddr(t)
		}
		kv = append(kv, k+"="+v)
	}
	n := testsupport.StartNodeEnv(t, bin, where, testsupport.FreeAddr(t), kv)
	for _, p := range paths {
		code, body := get(t, "http://"+n.Addr+p)
		if code != 200 {
			t.Errorf("%s: probe %s answers %d %q", where, p, code, body)
		}
	}
	if err := n.Terminate(15 * time.Second); err != nil {
		t.Errorf("%s: %v", where, err)
	}
}

// prometheusPort returns the port deploy/prometheus/prometheus.yml scrapes
// the nodes' DNS name on, or 0 when the file is not there yet.
func prometheusPort(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "deploy/prometheus/prometheus.yml"))
	if errors.Is(err, os.ErrNotExist) {
		t.Logf("deploy/prometheus/prometheus.yml is not in this tree yet (branch metrics): its port is not checked")
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			DNSSD []struct {
				Names []string `yaml:"names"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	for _, sc := range cfg.ScrapeConfigs {
		for _, d := range sc.DNSSD {
			if slices.Contains(d.Names, name) {
				return d.Port
			}
		}
	}
	t.Errorf("prometheus.yml: no dns_sd_configs entry for %q", name)
	return 0
}

// dockerfile is the instructions of a Dockerfile, continuation lines joined.
type dockerfile struct{ lines []string }

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var d dockerfile
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		d.lines = append(d.lines, cur.String())
		cur.Reset()
	}
	return d
}

// stages splits the instructions at each FROM.
func (d dockerfile) stages() [][]string {
	var out [][]string
	for _, l := range d.lines {
		if strings.HasPrefix(strings.ToUpper(l), "FROM ") {
			out = append(out, nil)
		}
		if len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], l)
		}
	}
	return out
}

func instr(lines []string, name string) []string {
	var out []string
	for _, l := range lines {
		if k, rest, ok := strings.Cut(l, " "); ok && strings.EqualFold(k, name) {
			out = append(out, strings.TrimSpace(rest))
		}
	}
	return out
}

func TestDockerfile(t *testing.T) {
	known := serveEnv(t)
	stages := readDockerfile(t).stages()
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, got %d stages", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	goVersion := goDirective(t)
	if from := instr(build, "FROM")[0]; !strings.Contains(from, "golang:"+goVersion) {
		t.Errorf("build stage %q does not use Go %s of go.mod", from, goVersion)
	}
	runs := strings.Join(instr(build, "RUN"), "\n")
	if !strings.Contains(runs, "CGO_ENABLED=0") || !strings.Contains(runs, "./cmd/scalechat") {
		t.Errorf("build stage must build ./cmd/scalechat with CGO_ENABLED=0 (a static binary):\n%s", runs)
	}

	from := instr(final, "FROM")[0]
	if !strings.Contains(from, "distroless/static") && !strings.HasPrefix(from, "scratch") {
		t.Errorf("final stage %q is not distroless/static or scratch", from)
	}
	users := instr(final, "USER")
	if len(users) == 0 {
		t.Fatal("final stage sets no USER: it would run as root")
	}
	if u, _, _ := strings.Cut(users[len(users)-1], ":"); u == "root" || u == "0" {
		t.Errorf("final stage runs as %q", users[len(users)-1])
	}

	env := map[string]string{}
	for _, e := range instr(final, "ENV") {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			t.Fatalf("ENV %q: use NAME=value", e)
		}
		env[k] = v
	}
	checkServeEnv(t, "Dockerfile", known, env)
	port := portOf(t, "Dockerfile SCALECHAT_ADDR", env["SCALECHAT_ADDR"])
	if exposed := strings.Fields(strings.Join(instr(final, "EXPOSE"), " ")); !slices.Contains(exposed, strconv.Itoa(port)) {
		t.Errorf("EXPOSE %v does not include the SCALECHAT_ADDR port %d", exposed, port)
	}

	var copied string
	for _, c := range instr(final, "COPY") {
		if f := strings.Fields(c); strings.HasPrefix(f[0], "--from=") {
			copied = f[len(f)-1]
		}
	}
	ep := instr(final, "ENTRYPOINT")
	if len(ep) == 0 || copied == "" || !strings.Contains(ep[0], `"`+copied+`"`) {
		t.Errorf("ENTRYPOINT %v does not run the binary copied to %q", ep, copied)
	}
	if cmd := instr(final, "CMD"); len(cmd) == 0 || cmd[0] != `["serve"]` {
		t.Errorf(`CMD %v, want ["serve"]`, cmd)
	}
	probeNode(t, "Dockerfile", env, "/readyz", "/healthz")
}

func goDirective(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile(repoFile(t, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	if !slices.Contains(patterns, ".git") {
		t.Error(".dockerignore does not leave out .git")
	}
	// The build needs these.
	for _, p := range []string{"go.mod", "go.sum", "cmd", "cmd/scalechat", "internal", "internal/webui/static"} {
		for _, pat := range patterns {
			if ok, _ := filepath.Match(pat, p); ok {
				t.Errorf(".dockerignore pattern %q leaves out %s, which the build needs", pat, p)
			}
		}
	}
}

// composeFile is what the test reads of docker-compose.yml.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Build       any               `yaml:"build"`
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Expose      []string          `yaml:"expose"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	StopGrace   string            `yaml:"stop_grace_period"`
	Deploy      struct {
		Replicas  int `yaml:"replicas"`
		Resources struct {
			Limits struct {
				CPUs   string `yaml:"cpus"`
				Memory string `yaml:"memory"`
			} `yaml:"limits"`
		} `yaml:"resources"`
	} `yaml:"deploy"`
}

// volume returns the host path (resolved against the compose file's
// directory) mounted at target by svc.
func (svc composeService) volume(dir, target string) (string, bool) {
	for _, v := range svc.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			return filepath.Join(dir, parts[0]), true
		}
	}
	return "", false
}

func TestCompose(t *testing.T) {
	c := checkCompose(t, "deploy/compose/docker-compose.yml", "redis")
	sc, ok := c.Services["scalechat"]
	if !ok {
		return
	}
	redisURL := sc.Environment["SCALECHAT_REDIS"]
	if !strings.HasPrefix(redisURL, "redis://redis:6379") {
		t.Errorf("SCALECHAT_REDIS=%q does not name the redis service", redisURL)
	}
	probeNode(t, "compose scalechat", sc.Environment, "/readyz", "/healthz")
}

// checkCompose checks a Compose file of the cluster (rel, from the
// repository's root): the services scalechat, engine (the cluster's
// server: redis, nats), haproxy, prometheus and grafana, with limits; the
// nodes' environment against serve's flags, their ports, grace period and
// metrics; HAProxy and the mounts of the repository's files. It returns
// the file (no services when one is missing), whose engine and URL the
// caller checks.
func checkCompose(t *testing.T, rel, engine string) composeFile {
	t.Helper()
	known := serveEnv(t)
	path := repoFile(t, rel)
	dir := filepath.Dir(path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	for _, name := range []string{"scalechat", engine, "haproxy", "prometheus", "grafana"} {
		svc, ok := c.Services[name]
		if !ok {
			t.Errorf("no service %s", name)
			continue
		}
		if svc.Deploy.Resources.Limits.CPUs == "" || svc.Deploy.Resources.Limits.Memory == "" {
			t.Errorf("service %s has no CPU and memory limits", name)
		}
	}
	if t.Failed() {
		return composeFile{}
	}

	sc := c.Services["scalechat"]
	if sc.Build == nil {
		t.Error("scalechat is not built from the Dockerfile")
	}
	if sc.Deploy.Replicas < 2 {
		t.Errorf("scalechat replicas %d: a cluster needs at least 2", sc.Deploy.Replicas)
	}
	checkServeEnv(t, "compose scalechat", known, sc.Environment)
	httpPort := portOf(t, "compose SCALECHAT_ADDR", sc.Environment["SCALECHAT_ADDR"])
	if !slices.Contains(sc.Expose, strconv.Itoa(httpPort)) {
		t.Errorf("scalechat exposes %v, not its SCALECHAT_ADDR port %d", sc.Expose, httpPort)
	}
	if m := sc.Environment["SCALECHAT_METRICS_ADDR"]; m != "" {
		mp := portOf(t, "compose SCALECHAT_METRICS_ADDR", m)
		if !slices.Contains(sc.Expose, strconv.Itoa(mp)) {
			t.Errorf("scalechat exposes %v, not its metrics port %d", sc.Expose, mp)
		}
		if pp := prometheusPort(t, "scalechat"); pp != 0 && pp != mp {
			t.Errorf("prometheus.yml scrapes scalechat on port %d, the nodes serve metrics on %d", pp, mp)
		}
	} else {
		t.Error("scalechat sets no SCALECHAT_METRICS_ADDR: Prometheus could not reach the nodes' loopback-only default")
	}
	grace, err := time.ParseDuration(sc.StopGrace)
	if err != nil {
		t.Fatalf("scalechat stop_grace_period %q: %v", sc.StopGrace, err)
	}
	if st := durationEnv(t, sc.Environment, "SCALECHAT_SHUTDOWN_TIMEOUT", 10*time.Second); grace <= st {
		t.Errorf("stop_grace_period %v must exceed the drain, SCALECHAT_SHUTDOWN_TIMEOUT %v", grace, st)
	}

	hp := c.Services["haproxy"]
	checkHAProxyEnv(t, "compose haproxy", hp.Environment, "scalechat", httpPort)
	if src, ok := hp.volume(dir, "/usr/local/etc/haproxy/haproxy.cfg"); !ok || src != repoFile(t, "deploy/haproxy/haproxy.cfg") {
		t.Errorf("haproxy does not mount deploy/haproxy/haproxy.cfg at the image's config path: %v", hp.Volumes)
	}
	lbPort := portOf(t, "compose LB_ADDR", "0.0.0.0"+hp.Environment["LB_ADDR"])
	if !slices.ContainsFunc(hp.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+strconv.Itoa(lbPort)) }) {
		t.Errorf("haproxy publishes %v, not LB_ADDR's port %d", hp.Ports, lbPort)
	}

	mounts := map[string]struct {
		svc, target, rel string
	}{
		"prometheus config":    {"prometheus", "/etc/prometheus/prometheus.yml", "deploy/prometheus/prometheus.yml"},
		"grafana provisioning": {"grafana", "/etc/grafana/provisioning", "deploy/grafana/provisioning"},
		"grafana dashboards":   {"grafana", "/var/lib/grafana/dashboards/scalechat", "deploy/grafana/dashboards"},
	}
	for what, m := range mounts {
		src, ok := c.Services[m.svc].volume(dir, m.target)
		if !ok || src != repoFile(t, m.rel) {
			t.Errorf("%s: %s does not mount %s at %s: %v", what, m.svc, m.rel, m.target, c.Services[m.svc].Volumes)
			continue
		}
		if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
			t.Logf("%s: %s is not in this tree yet (branch metrics)", what, m.rel)
		}
	}
	return c
}

// checkHAProxyEnv checks a HAProxy container's variables against
// haproxy.cfg and the nodes' DNS name and port.
func checkHAProxyEnv(t *testing.T, where string, env map[string]string, host string, port int) {
	t.Helper()
	vars := haproxyEnv(t)
	for k := range env {
		if !vars[k] {
			t.Errorf("%s: haproxy.cfg does not read %s", where, k)
		}
	}
	dns := env["LB_NODES_DNS"]
	h, _, err := net.SplitHostPort(dns)
	if err != nil || h != host || portOf(t, where, dns) != port {
		t.Errorf("%s: LB_NODES_DNS=%q, want %s:%d", where, dns, host, port)
	}
}

func durationEnv(t *testing.T, env map[string]string, name string, def time.Duration) time.Duration {
	t.Helper()
	v, ok := env[name]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// k8sObject is the part of any Kubernetes object the test reads; the rest
// is decoded per kind from raw.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	raw yaml.Node
}

type k8sContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop struct {
			Sleep struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Limits   map[string]string `yaml:"limits"`
		Requests map[string]string `yaml:"requests"`
	} `yaml:"resources"`
}

func (c k8sContainer) env() map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func (c k8sContainer) port(name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sPodSpec struct {
	TerminationGracePeriodSeconds *int           `yaml:"terminationGracePeriodSeconds"`
	RestartPolicy                 string         `yaml:"restartPolicy"`
	Containers                    []k8sContainer `yaml:"containers"`
}

type k8sWorkload struct {
	Spec struct {
		Replicas       int    `yaml:"replicas"`
		Completions    int    `yaml:"completions"`
		Parallelism    int    `yaml:"parallelism"`
		CompletionMode string `yaml:"completionMode"`
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec k8sPodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sService struct {
	Spec struct {
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

func readK8s(t *testing.T) map[string]*k8sObject {
	t.Helper()
	return readK8sDir(t, "deploy/kubernetes")
}

// readK8sDir reads the objects of the *.yaml files of a folder (rel, from
// the repository's root), by kind/name.
func readK8sDir(t *testing.T, rel string) map[string]*k8sObject {
	t.Helper()
	files, err := filepath.Glob(repoFile(t, rel+"/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s/*.yaml: %v", rel, err)
	}
	objs := map[string]*k8sObject{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o k8sObject
			if err := dec.Decode(&o.raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", filepath.Base(f), err)
			}
			if err := o.raw.Decode(&o); err != nil {
				t.Fatalf("%s: %v", filepath.Base(f), err)
			}
			if o.Kind == "" || o.APIVersion == "" || (o.Metadata.Name == "" && o.Kind != "Kustomization") {
				t.Errorf("%s: an object without apiVersion, kind or name", filepath.Base(f))
				continue
			}
			key := o.Kind + "/" + o.Metadata.Name
			if objs[key] != nil {
				t.Errorf("%s defined twice", key)
			}
			objs[key] = &o
		}
	}
	return objs
}

func decodeK8s[T any](t *testing.T, objs map[string]*k8sObject, key string) T {
	t.Helper()
	var v T
	o := objs[key]
	if o == nil {
		t.Fatalf("deploy/kubernetes has no %s", key)
	}
	if err := o.raw.Decode(&v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

func TestKubernetes(t *testing.T) {
	known := serveEnv(t)
	objs := readK8s(t)

	dep := decodeK8s[k8sWorkload](t, objs, "Deployment/scalechat")
	if dep.Spec.Replicas < 2 {
		t.Errorf("scalechat replicas %d", dep.Spec.Replicas)
	}
	labels := dep.Spec.Template.Metadata.Labels
	if !subset(dep.Spec.Selector.MatchLabels, labels) {
		t.Fatalf("Deployment selector %v does not match its pods %v", dep.Spec.Selector.MatchLabels, labels)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("scalechat pod has %d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	env := c.env()
	checkServeEnv(t, "Deployment/scalechat", known, env)
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("scalechat container args %v, want serve", c.Args)
	}
	httpPort := portOf(t, "SCALECHAT_ADDR", env["SCALECHAT_ADDR"])
	if c.port("http") != httpPort {
		t.Errorf("container port http is %d, SCALECHAT_ADDR listens on %d", c.port("http"), httpPort)
	}
	if m := env["SCALECHAT_METRICS_ADDR"]; m == "" {
		t.Error("scalechat sets no SCALECHAT_METRICS_ADDR: Prometheus could not reach the nodes' loopback-only default")
	} else if mp := portOf(t, "SCALECHAT_METRICS_ADDR", m); c.port("metrics") != mp {
		t.Errorf("container port metrics is %d, SCALECHAT_METRICS_ADDR listens on %d", c.port("metrics"), mp)
	}
	for _, p := range []struct {
		what  string
		probe *k8sProbe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no %s httpGet probe", p.what)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || fmt.Sprint(p.probe.HTTPGet.Port) != "http" {
			t.Errorf("%s probe GET %v on port %v, want %s on http", p.what, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port, p.path)
		}
	}
	if c.Resources.Limits["cpu"] == "" || c.Resources.Limits["memory"] == "" {
		t.Error("scalechat has no CPU and memory limits")
	}
	if c.Resources.Requests["cpu"] == "" {
		t.Error("scalechat has no CPU request: the HorizontalPodAutoscaler's utilization needs one")
	}
	// The drain must fit in the grace period: preStop, then the shutdown.
	shutdown := durationEnv(t, env, "SCALECHAT_SHUTDOWN_TIMEOUT", 10*time.Second)
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if preStop == 0 {
		t.Error("no preStop sleep: new clients would keep arriving while the pod drains")
	}
	grace := 30 * time.Second // Kubernetes' default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	if grace <= preStop+shutdown {
		t.Errorf("terminationGracePeriodSeconds %v must exceed preStop %v + SCALECHAT_SHUTDOWN_TIMEOUT %v", grace, preStop, shutdown)
	}

	svc := decodeK8s[k8sService](t, objs, "Service/scalechat")
	if !subset(svc.Spec.Selector, labels) {
		t.Errorf("Service/scalechat selector %v does not match the pods %v", svc.Spec.Selector, labels)
	}
	if svc.Spec.ClusterIP != "None" {
		t.Error("Service/scalechat must be headless: HAProxy and Prometheus discover every pod through its DNS")
	}
	for _, p := range svc.Spec.Ports {
		target := fmt.Sprint(p.TargetPort)
		if n, err := strconv.Atoi(target); err == nil && n != p.Port {
			t.Errorf("Service/scalechat port %s targets %d", p.Name, n)
		} else if err != nil && c.port(target) == 0 {
			t.Errorf("Service/scalechat port %s targets %q, which the container does not name", p.Name, target)
		} else if err != nil && c.port(target) != p.Port {
			t.Errorf("Service/scalechat port %s is %d, the container's %s is %d", p.Name, p.Port, target, c.port(target))
		}
	}

	type hpaSpec struct {
		Spec struct {
			ScaleTargetRef struct{ Kind, Name string } `yaml:"scaleTargetRef"`
			MinReplicas    int                         `yaml:"minReplicas"`
			MaxReplicas    int                         `yaml:"maxReplicas"`
		} `yaml:"spec"`
	}
	hpa := decodeK8s[hpaSpec](t, objs, "HorizontalPodAutoscaler/scalechat")
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != "scalechat" {
		t.Errorf("HPA scales %+v", hpa.Spec.ScaleTargetRef)
	}
	if hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas > 16 || hpa.Spec.MinReplicas > hpa.Spec.MaxReplicas {
		t.Errorf("HPA replicas %d..%d: want at least 2, at most haproxy.cfg's 16 server slots", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
	}
	pdb := decodeK8s[struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}](t, objs, "PodDisruptionBudget/scalechat")
	if !subset(pdb.Spec.Selector.MatchLabels, labels) {
		t.Errorf("PodDisruptionBudget selector %v does not match the pods %v", pdb.Spec.Selector.MatchLabels, labels)
	}

	// Redis: the Service SCALECHAT_REDIS names, on its port.
	redisSvc := decodeK8s[k8sService](t, objs, "Service/redis")
	redisDep := decodeK8s[k8sWorkload](t, objs, "Deployment/redis")
	if !subset(redisSvc.Spec.Selector, redisDep.Spec.Template.Metadata.Labels) {
		t.Error("Service/redis does not select the redis pods")
	}
	if len(redisSvc.Spec.Ports) == 0 || env["SCALECHAT_REDIS"] != fmt.Sprintf("redis://redis:%d/0", redisSvc.Spec.Ports[0].Port) {
		t.Errorf("SCALECHAT_REDIS=%q does not name Service/redis", env["SCALECHAT_REDIS"])
	}

	// HAProxy: the shipped config, the headless Service's DNS name.
	cm := decodeK8s[struct {
		Data map[string]string `yaml:"data"`
	}](t, objs, "ConfigMap/haproxy")
	cfg, err := os.ReadFile(repoFile(t, "deploy/haproxy/haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["haproxy.cfg"] != string(cfg) {
		t.Error("ConfigMap/haproxy differs from deploy/haproxy/haproxy.cfg: copy the file into haproxy.yaml (indented 4 spaces)")
	}
	lb := decodeK8s[k8sWorkload](t, objs, "Deployment/haproxy")
	checkHAProxyEnv(t, "Deployment/haproxy", lb.Spec.Template.Spec.Containers[0].env(), "scalechat.default.svc.cluster.local", httpPort)

	probeNode(t, "Deployment/scalechat", env, c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
}

func TestKubernetesLoadtestJob(t *testing.T) {
	objs := readK8s(t)
	job := decodeK8s[k8sWorkload](t, objs, "Job/scalechat-loadtest")
	if job.Spec.CompletionMode != "Indexed" {
		t.Errorf("completionMode %q, want Indexed", job.Spec.CompletionMode)
	}
	n := job.Spec.Completions
	if n < 2 || job.Spec.Parallelism != n {
		t.Errorf("completions %d, parallelism %d: every shard must run at once", n, job.Spec.Parallelism)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "loadtest" {
		t.Fatalf("args %v do not run loadtest", c.Args)
	}
	if want := fmt.Sprintf("--shard=$(JOB_COMPLETION_INDEX)/%d", n); !slices.Contains(c.Args, want) {
		t.Errorf("args %v lack %s", c.Args, want)
	}
	// The target is Service/haproxy through the variables the kubelet sets
	// for it: <NAME>_SERVICE_HOST and <NAME>_SERVICE_PORT_<PORT NAME>.
	lb := decodeK8s[k8sService](t, objs, "Service/haproxy")
	lbPort := 0
	for _, p := range lb.Spec.Ports {
		if p.Name == "http" {
			lbPort = p.Port
		}
	}
	if !slices.Contains(c.Args, "--url=ws://$(HAPROXY_SERVICE_HOST):$(HAPROXY_SERVICE_PORT_HTTP)/ws") || lbPort == 0 {
		t.Errorf("args %v do not target Service/haproxy's http port", c.Args)
	}
	// The flags must be loadtest's: let the binary check them, as
	// Kubernetes would expand them in the last pod.
	expand := strings.NewReplacer("$(JOB_COMPLETION_INDEX)", strconv.Itoa(n-1),
		"$(HAPROXY_SERVICE_HOST)", "127.0.0.1", "$(HAPROXY_SERVICE_PORT_HTTP)", strconv.Itoa(lbPort))
	args := []string{"loadtest", "--dry-run"}
	for _, a := range c.Args[1:] {
		a = expand.Replace(a)
		if strings.Contains(a, "$(") {
			t.Errorf("argument %q refers to a variable the pod does not have", a)
		}
		if strings.HasPrefix(a, "--out=") {
			a = "--out=" + filepath.Join(t.TempDir(), "run.csv.gz")
		}
		args = append(args, a)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Errorf("scalechat %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func subset(sub, set map[string]string) bool {
	if len(sub) == 0 {
		return false
	}
	for k, v := range sub {
		if set[k] != v {
			return false
		}
	}
	return true
}

// TestRedisNeverEvicts: every Redis the deployment files start with a
// memory limit refuses writes when full (noeviction) rather than evict
// keys. A room's keys all have TTLs, so volatile-* and allkeys-* policies
// may evict its counter alone: the next publish would start its seqs again
// under the same epoch, which nodes cannot tell from messages they have
// (docs/cluster.md, Limits). Refused writes reach the sender (unavailable).
func TestRedisNeverEvicts(t *testing.T) {
	root := repoFile(t, "deploy")
	policy := regexp.MustCompile(`"--maxmemory-policy",\s*"([^"]+)"`)
	limited := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yml") || strings.HasSuffix(path, ".yaml")) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), `"--maxmemory"`) {
			return nil
		}
		limited++
		ms := policy.FindAllStringSubmatch(string(b), -1)
		if len(ms) == 0 {
			t.Errorf("%s limits Redis's memory without --maxmemory-policy noeviction (Redis's default policy is noeviction, but say it)", path)
		}
		for _, m := range ms {
			if m[1] != "noeviction" {
				t.Errorf("%s runs Redis with --maxmemory-policy %s, want noeviction", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if limited == 0 {
		t.Fatal("no deployment file limits Redis's memory: the test checked nothing")
	}
}
