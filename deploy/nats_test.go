//go:build linux

package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// The NATS variants of the deployment files (the engine is in progress,
// docs/nats.md): docker-compose.nats.yml and deploy/kubernetes-nats,
// checked as the Redis ones are, and their nats-server command lines run
// for real on loopback (the release the tests pin), only addresses and
// folders moved. The nodes' SCALECHAT_NATS* are pendingEnv until serve
// has --nats; the probe then runs the node on those servers.

// natsImage is the official image of the nats-server release the tests
// run (testsupport.NATSVersion).
var natsImage = "nats:" + strings.TrimPrefix(testsupport.NATSVersion, "v")

func TestComposeNATS(t *testing.T) {
	c := checkCompose(t, "deploy/compose/docker-compose.nats.yml", "nats")
	sc, ok := c.Services["scalechat"]
	if !ok {
		return
	}
	if _, ok := c.Services["redis"]; ok {
		t.Error("a redis service on NATS")
	}
	if _, ok := sc.Environment["SCALECHAT_REDIS"]; ok {
		t.Error("scalechat sets SCALECHAT_REDIS on NATS")
	}
	nats := c.Services["nats"]
	if nats.Image != natsImage {
		t.Errorf("nats image %q, want %s (the release the tests run)", nats.Image, natsImage)
	}
	args := natsFlags(t, "compose nats", nats.Command)
	if !args.has("-js", "--jetstream") {
		t.Errorf("nats command %q: JetStream is off (-js)", nats.Command)
	}
	if sd := args.value("-sd", "--store_dir"); sd == "" || !slices.ContainsFunc(nats.Volumes, func(v string) bool {
		p := strings.Split(v, ":")
		return len(p) >= 2 && p[1] == sd
	}) {
		t.Errorf("nats store %q is not a volume: %v", sd, nats.Volumes)
	}
	client := cmpOr(args.value("-p", "--port"), "4222")
	if !slices.Contains(nats.Expose, client) {
		t.Errorf("nats exposes %v, not its client port %s", nats.Expose, client)
	}
	if u := sc.Environment["SCALECHAT_NATS"]; u != "nats://nats:"+client {
		t.Errorf("SCALECHAT_NATS=%q, want nats://nats:%s (the nats service)", u, client)
	}
	if r := sc.Environment["SCALECHAT_NATS_REPLICAS"]; r != "" && r != "1" {
		t.Errorf("SCALECHAT_NATS_REPLICAS=%q on one NATS server", r)
	}
	if t.Failed() {
		return
	}

	urls := startNATS(t, [][]string{nats.Command}, nil)
	env := maps.Clone(sc.Environment)
	env["SCALECHAT_NATS"] = strings.Join(urls, ",")
	probeNode(t, "compose scalechat on NATS", env, "/readyz", "/healthz")
}

// natsStatefulSet is what the test reads of the NATS StatefulSet.
type natsStatefulSet struct {
	Spec struct {
		ServiceName         string `yaml:"serviceName"`
		Replicas            int    `yaml:"replicas"`
		PodManagementPolicy string `yaml:"podManagementPolicy"`
		Selector            struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []natsContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type natsContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string `yaml:"name"`
		ValueFrom struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// fieldEnv reports whether the container has variable name from the pod's
// field path.
func (c natsContainer) fieldEnv(name, path string) bool {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom.FieldRef.FieldPath == path {
			return true
		}
	}
	return false
}

// mount is the volume mounted at path, "" when none is.
func (c natsContainer) mount(path string) string {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return m.Name
		}
	}
	return ""
}

// natsService is what the test reads of the NATS Service.
type natsService struct {
	Spec struct {
		ClusterIP                string            `yaml:"clusterIP"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]string `yaml:"selector"`
		Ports                    []struct {
			Name string `yaml:"name"`
			Port int    `yaml:"port"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

func TestKubernetesNATS(t *testing.T) {
	const rel = "deploy/kubernetes-nats"
	known := serveEnv(t)
	objs := readK8sDir(t, rel)
	base := readK8s(t)

	// The overlay: the Redis manifests, the NATS cluster, the nodes'
	// patch, every Redis object deleted.
	kust := decodeK8s[struct {
		Resources []string `yaml:"resources"`
		Patches   []struct {
			Path  string `yaml:"path"`
			Patch string `yaml:"patch"`
		} `yaml:"patches"`
	}](t, objs, "Kustomization/")
	for _, r := range []string{"../kubernetes", "nats.yaml"} {
		if !slices.Contains(kust.Resources, r) {
			t.Errorf("kustomization.yaml resources %v lack %s", kust.Resources, r)
		}
	}
	deleted := map[string]bool{}
	patched := false
	for _, p := range kust.Patches {
		if p.Path == "scalechat-nats.yaml" {
			patched = true
		}
		var d struct {
			Patch    string `yaml:"$patch"`
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		if p.Patch != "" {
			if err := yaml.Unmarshal([]byte(p.Patch), &d); err != nil {
				t.Fatalf("kustomization.yaml patch %q: %v", p.Patch, err)
			}
			if d.Patch == "delete" {
				deleted[d.Kind+"/"+d.Metadata.Name] = true
			}
		}
	}
	if !patched {
		t.Error("kustomization.yaml does not patch the nodes with scalechat-nats.yaml")
	}
	for key := range base {
		if strings.HasSuffix(key, "/redis") && !deleted[key] {
			t.Errorf("%s of deploy/kubernetes still runs on NATS", key)
		}
	}

	// The NATS servers.
	sts := decodeK8s[natsStatefulSet](t, objs, "StatefulSet/nats")
	svc := decodeK8s[natsService](t, objs, "Service/"+sts.Spec.ServiceName)
	if n := sts.Spec.Replicas; n != 3 {
		t.Errorf("StatefulSet/nats replicas %d, want 3 (JetStream's quorum survives one)", n)
	}
	if sts.Spec.PodManagementPolicy != "Parallel" {
		t.Error("StatefulSet/nats starts its pods one by one: the first is never ready alone")
	}
	labels := sts.Spec.Template.Metadata.Labels
	if !subset(sts.Spec.Selector.MatchLabels, labels) || !subset(svc.Spec.Selector, labels) {
		t.Errorf("the selectors of StatefulSet/nats and its Service do not match its pods %v", labels)
	}
	if svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses {
		t.Error("Service/nats must be headless and publish unready pods: the routes resolve before a server is ready")
	}
	if len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("nats pod has %d containers", len(sts.Spec.Template.Spec.Containers))
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if c.Image != natsImage {
		t.Errorf("nats image %q, want %s (the release the tests run)", c.Image, natsImage)
	}
	port := func(name string) string {
		for _, p := range c.Ports {
			if p.Name == name {
				return strconv.Itoa(p.ContainerPort)
			}
		}
		return ""
	}
	svcPort := func(name string) string {
		for _, p := range svc.Spec.Ports {
			if p.Name == name {
				return strconv.Itoa(p.Port)
			}
		}
		return ""
	}
	args := natsFlags(t, "StatefulSet/nats", c.Args)
	if !args.has("-js", "--jetstream") {
		t.Errorf("nats args %q: JetStream is off", c.Args)
	}
	for _, p := range []struct{ flag, short, def, name string }{
		{"--port", "-p", "4222", "client"}, {"--http_port", "-m", "", "monitor"},
	} {
		if v := cmpOr(args.value(p.short, p.flag), p.def); v == "" || v != port(p.name) || v != svcPort(p.name) {
			t.Errorf("%s %q, container port %s %q, Service port %q: want one port", p.flag, v, p.name, port(p.name), svcPort(p.name))
		}
	}
	claims := map[string]bool{}
	for _, v := range sts.Spec.VolumeClaimTemplates {
		claims[v.Metadata.Name] = true
	}
	if sd := args.value("-sd", "--store_dir"); sd == "" || !claims[c.mount(sd)] {
		t.Errorf("the JetStream store %q is not a volume claim's mount", sd)
	}
	// A server's name is its pod's, stable across restarts; JetStream
	// needs names and one cluster name.
	if args.value("--server_name", "-n") != "$(POD_NAME)" || !c.fieldEnv("POD_NAME", "metadata.name") {
		t.Errorf("--server_name %q is not the pod's name $(POD_NAME)", args.value("--server_name", "-n"))
	}
	if args.value("--cluster_name") == "" {
		t.Error("no --cluster_name")
	}
	cport := port("cluster")
	if u, err := url.Parse(args.value("--cluster")); err != nil || u.Port() != cport || cport != svcPort("cluster") {
		t.Errorf("--cluster %q does not listen on the cluster port %q of the container and the Service", args.value("--cluster"), cport)
	}
	// Every server routes to every pod, by its stable name.
	var wantRoutes, wantClients []string
	routeHosts := map[string]int{}
	for i := range sts.Spec.Replicas {
		host := fmt.Sprintf("nats-%d.%s", i, sts.Spec.ServiceName)
		wantRoutes = append(wantRoutes, "nats://"+host+":"+cport)
		wantClients = append(wantClients, "nats://"+host+":"+port("client"))
		routeHosts[host+":"+cport] = i
	}
	if r := args.value("--routes"); r != strings.Join(wantRoutes, ",") {
		t.Errorf("--routes %q, want every pod's: %s", r, strings.Join(wantRoutes, ","))
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || fmt.Sprint(p.HTTPGet.Port) != "monitor" || !strings.HasPrefix(p.HTTPGet.Path, "/healthz") {
		t.Error("nats has no readiness probe GET /healthz on the monitor port")
	}
	decodeK8s[struct{}](t, objs, "PodDisruptionBudget/nats")

	// The nodes: the base Deployment, Redis's variable deleted, every
	// server's URL, three replicas.
	dep := decodeK8s[struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string `yaml:"name"`
						Env  []struct {
							Name  string `yaml:"name"`
							Value string `yaml:"value"`
							Patch string `yaml:"$patch"`
						} `yaml:"env"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}](t, objs, "Deployment/scalechat")
	baseDep := decodeK8s[k8sWorkload](t, base, "Deployment/scalechat")
	env := baseDep.Spec.Template.Spec.Containers[0].env()
	if cs := dep.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Name != baseDep.Spec.Template.Spec.Containers[0].Name {
		t.Fatalf("scalechat-nats.yaml does not patch the container %q", baseDep.Spec.Template.Spec.Containers[0].Name)
	}
	patch := map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if e.Patch == "delete" {
			delete(env, e.Name)
			continue
		}
		patch[e.Name] = e.Value
		env[e.Name] = e.Value
	}
	checkServeEnv(t, "scalechat-nats.yaml", known, patch)
	if _, ok := env["SCALECHAT_REDIS"]; ok {
		t.Error("the nodes keep SCALECHAT_REDIS on NATS")
	}
	if u := env["SCALECHAT_NATS"]; u != strings.Join(wantClients, ",") {
		t.Errorf("SCALECHAT_NATS=%q, want every server's: %s", u, strings.Join(wantClients, ","))
	}
	if r := env["SCALECHAT_NATS_REPLICAS"]; r != "3" || sts.Spec.Replicas < 3 {
		t.Errorf("SCALECHAT_NATS_REPLICAS=%q with %d servers, want 3", r, sts.Spec.Replicas)
	}
	kustomizeNATS(t, rel)
	if t.Failed() {
		return
	}

	// The three servers' command lines, as the pods run them (the pod's
	// name in place of $(POD_NAME)), on loopback: one cluster with
	// JetStream, and a node of the Deployment on it.
	cmds := make([][]string, sts.Spec.Replicas)
	for i := range cmds {
		cmds[i] = make([]string, len(c.Args))
		for j, a := range c.Args {
			cmds[i][j] = strings.ReplaceAll(a, "$(POD_NAME)", fmt.Sprintf("nats-%d", i))
		}
	}
	urls := startNATS(t, cmds, routeHosts)
	env["SCALECHAT_NATS"] = strings.Join(urls, ",")
	probeNode(t, "Deployment/scalechat on NATS", env, "/readyz", "/healthz")
}

// kustomizeNATS builds the overlay with kubectl when there is one (not
// needed otherwise): it proves the patches apply. No Redis object, the
// NATS ones, the nodes' variables.
func kustomizeNATS(t *testing.T, rel string) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Logf("no kubectl: %s is not built (kubectl kustomize)", rel)
		return
	}
	out, err := exec.Command(kubectl, "kustomize", repoFile(t, rel)).CombinedOutput()
	if err != nil {
		t.Errorf("kubectl kustomize %s: %v\n%s", rel, err, out)
		return
	}
	built := map[string]bool{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	var nodeEnv []string
	for {
		var o struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Env []struct {
								Name string `yaml:"name"`
							} `yaml:"env"`
						} `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", rel, err)
		}
		key := o.Kind + "/" + o.Metadata.Name
		built[key] = true
		if key == "Deployment/scalechat" {
			for _, e := range o.Spec.Template.Spec.Containers[0].Env {
				nodeEnv = append(nodeEnv, e.Name)
			}
		}
	}
	for _, key := range []string{"Deployment/scalechat", "Deployment/haproxy", "StatefulSet/nats", "Service/nats"} {
		if !built[key] {
			t.Errorf("kubectl kustomize %s: no %s", rel, key)
		}
	}
	for _, key := range []string{"Deployment/redis", "Service/redis"} {
		if built[key] {
			t.Errorf("kubectl kustomize %s: %s still there", rel, key)
		}
	}
	if slices.Contains(nodeEnv, "SCALECHAT_REDIS") || !slices.Contains(nodeEnv, "SCALECHAT_NATS") {
		t.Errorf("kubectl kustomize %s: the nodes' variables %v", rel, nodeEnv)
	}
}

// natsArgs are a nats-server command line: flag and value pairs.
type natsArgs [][2]string

// natsBool are the nats-server flags the files use that take no value.
var natsBool = []string{"-js", "--jetstream", "-D", "-V", "-DV", "--tls", "--tlsverify"}

func natsFlags(t *testing.T, where string, args []string) natsArgs {
	t.Helper()
	var out natsArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			t.Fatalf("%s: %q in %q is no flag", where, a, args)
		}
		if k, v, ok := strings.Cut(a, "="); ok {
			out = append(out, [2]string{k, v})
			continue
		}
		if slices.Contains(natsBool, a) {
			out = append(out, [2]string{a, ""})
			continue
		}
		if i+1 == len(args) {
			t.Fatalf("%s: %s has no value", where, a)
		}
		out = append(out, [2]string{a, args[i+1]})
		i++
	}
	return out
}

func (a natsArgs) has(names ...string) bool {
	return slices.ContainsFunc(a, func(p [2]string) bool { return slices.Contains(names, p[0]) })
}

// value is the last value of the flag (any of its names), "" without it.
func (a natsArgs) value(names ...string) string {
	v := ""
	for _, p := range a {
		if slices.Contains(names, p[0]) {
			v = p[1]
		}
	}
	return v
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// startNATS runs nats-server with each command line of a file on
// loopback, the flags kept and the addresses moved: each its own client,
// monitoring and cluster ports and store folder, the routes (host:port of
// routeHosts, the server's index) to the other servers' cluster ports.
// It waits until each /healthz answers 200 (JetStream ready; on a
// cluster, a leader elected) and returns the client URLs.
func startNATS(t *testing.T, cmds [][]string, routeHosts map[string]int) []string {
	t.Helper()
	if _, err := exec.LookPath("nats-server"); err != nil {
		msg := "nats-server is not installed (go install github.com/nats-io/nats-server/v2@" + testsupport.NATSVersion + "): the files' command lines are not run"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	n := len(cmds)
	clients, monitors, clusters := make([]string, n), make([]string, n), make([]string, n)
	for i := range n {
		clients[i], monitors[i], clusters[i] = testsupport.FreeAddr(t), testsupport.FreeAddr(t), testsupport.FreeAddr(t)
	}
	portOf := func(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
	var waits []func()
	for i, cmd := range cmds {
		local := []string{"-a", "127.0.0.1", "-p", portOf(clients[i])}
		for _, p := range natsFlags(t, "nats-server", cmd) {
			k, v := p[0], p[1]
			switch k {
			case "-a", "--addr", "--net", "-p", "--port":
				continue // loopback, the port above
			case "-m", "--http_port":
				v = portOf(monitors[i])
			case "-sd", "--store_dir":
				v = t.TempDir()
			case "--cluster":
				v = "nats://" + clusters[i]
			case "--routes":
				var rs []string
				for _, r := range strings.Split(v, ",") {
					u, err := url.Parse(r)
					j, ok := routeHosts[u.Host]
					if err != nil || !ok {
						t.Fatalf("route %q names none of the servers %v", r, routeHosts)
					}
					rs = append(rs, "nats://"+clusters[j])
				}
				v = strings.Join(rs, ",")
			}
			local = append(local, k)
			if v != "" || !slices.Contains(natsBool, k) {
				local = append(local, v)
			}
		}
		if !slices.Contains(local, "-m") && !slices.Contains(local, "--http_port") {
			local = append(local, "-m", portOf(monitors[i]))
		}
		waits = append(waits, runNATS(t, local, monitors[i]))
	}
	urls := make([]string, n)
	for i, wait := range waits {
		wait()
		urls[i] = "nats://" + clients[i]
	}
	return urls
}

// runNATS starts nats-server with args until the test ends, and returns
// the wait until its /healthz on monitor answers 200 (JetStream ready; on
// a cluster, a leader elected), which fails the test if the server exits
// first (a flag it does not know) or does not answer within 30 s. Its
// output is logged if the test fails.
func runNATS(t *testing.T, args []string, monitor string) (wait func()) {
	t.Helper()
	var out lockedBuffer
	cmd := exec.Command("nats-server", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("nats-server %s:\n%s", strings.Join(args, " "), out.String())
		}
	})
	return func() {
		t.Helper()
		client := http.Client{Timeout: time.Second}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if resp, err := client.Get("http://" + monitor + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
			select {
			case <-done:
				t.Fatalf("nats-server %s exited: %v\n%s", strings.Join(args, " "), cmd.ProcessState, out.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("nats-server %s: /healthz not 200 within 30s", strings.Join(args, " "))
			}
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
