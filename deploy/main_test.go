// Package deploy_test checks the deployment files of deploy/ against the
// code: the load balancer configurations run for real in front of real
// nodes, and the container and orchestration files are parsed and compared
// with the flags, ports and probe paths of the built binary.
package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// bin is the scalechat binary built once by TestMain: every node of every
// test is a process of it.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "scalechat-deploy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, err = testsupport.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoFile returns the path of a file of the repository from its path
// relative to the module root.
func repoFile(t testing.TB, rel string) string {
	t.Helper()
	root, err := testsupport.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}
