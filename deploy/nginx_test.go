//go:build linux

package deploy_test

import (
	"os/exec"
	"testing"

	"github.com/scalechat/scalechat/internal/testsupport"
)

func TestNginxConfigIsValid(t *testing.T) {
	nginx := testsupport.Need(t, "nginx", "nginx")
	prefix := t.TempDir()
	conf := testsupport.WriteNginxConf(t, repoFile(t, "deploy/nginx"), prefix, "127.0.0.1:18080",
		[]string{"127.0.0.1:18081", "127.0.0.1:18082"})
	out, err := exec.Command(nginx, "-t", "-p", prefix, "-c", conf).CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}

func TestNginxKeepsRoomOnOneNode(t *testing.T) {
	testsupport.Need(t, "nginx", "nginx")
	redis := testsupport.StartRedis(t)
	nodes := startNodes(t, redis, 3)
	lb := testsupport.StartNginx(t, repoFile(t, "deploy/nginx"), nodes)
	keepsRoomsOnOneNode(t, &cluster{redis: redis, nodes: nodes, lb: lb})
}
