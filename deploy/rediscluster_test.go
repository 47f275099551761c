//go:build linux

package deploy_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestRedisClusterFiles checks the Redis Cluster deployment files against
// each other: every Redis runs in cluster mode, the job that creates the
// cluster names all of them, and the nodes' SCALECHAT_REDIS is a
// redis-cluster:// URL of the same ones. (No container engine here: what
// the files run is not started.)
func TestRedisClusterFiles(t *testing.T) {
	var c struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Entrypoint  []string          `yaml:"entrypoint"`
			Environment map[string]string `yaml:"environment"`
			Profiles    []string          `yaml:"profiles"`
		} `yaml:"services"`
	}
	b, err := os.ReadFile(repoFile(t, "deploy/compose/redis-cluster.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("redis-cluster.yml: %v", err)
	}
	var nodes []string
	for name, svc := range c.Services {
		if !strings.HasPrefix(name, "redis-") || name == "redis-cluster-init" {
			continue
		}
		nodes = append(nodes, name+":6379")
		args := strings.Join(svc.Command, " ")
		if !strings.Contains(args, "--cluster-enabled yes") || !strings.HasPrefix(svc.Image, "redis:7") {
			t.Errorf("%s: %s %q is not a Redis 7 in cluster mode", name, svc.Image, args)
		}
	}
	slices.Sort(nodes)
	if len(nodes) != 6 {
		t.Fatalf("%d Redis nodes, want 6 (3 masters, 3 replicas)", len(nodes))
	}
	init := strings.Join(c.Services["redis-cluster-init"].Entrypoint, " ")
	if !strings.Contains(init, "redis-cli --cluster create "+strings.Join(nodes, " ")+" --cluster-replicas 1") {
		t.Errorf("the init job does not create the cluster of %v: %q", nodes, init)
	}
	url := c.Services["scalechat"].Environment["SCALECHAT_REDIS"]
	if url != "redis-cluster://"+strings.Join(nodes, ",") {
		t.Errorf("SCALECHAT_REDIS %q does not name the cluster's nodes %v", url, nodes)
	}
	if !slices.Contains(c.Services["redis"].Profiles, "single-redis") {
		t.Error("the main file's single Redis still starts")
	}

	b, err = os.ReadFile(repoFile(t, "deploy/kubernetes/redis-cluster/redis-cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"replicas: 6", `"--cluster-enabled", "yes"`, "redis-cli --cluster create", "--cluster-replicas 1", "clusterIP: None", "containerPort: 16379"} {
		if !strings.Contains(s, want) {
			t.Errorf("redis-cluster.yaml lacks %q", want)
		}
	}
	k, err := os.ReadFile(repoFile(t, "deploy/kubernetes/redis-cluster/kustomization.yaml"))
	if err != nil || !strings.Contains(string(k), "redis-cluster.yaml") {
		t.Errorf("kustomization.yaml does not list redis-cluster.yaml (%v)", err)
	}
}
