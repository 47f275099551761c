//go:build linux

package netpoll

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// blockingCalls are the system calls an event loop makes per message or per
// wait. Through unix or syscall they go by the scheduler's entersyscall,
// which wakes Go's sysmon whenever it sleeps, and it then polls every 20 µs
// for a millisecond; a blocking epoll_wait also holds the loop's P in the
// call. The loops make them raw (Read, Write, a writev by RawSyscall) and
// wait in Go's poller (Poller.Wait): docs/benchmarks-log.md, "A loop that waits
// in Go's poller".
var blockingCalls = map[string]bool{
	"unix.Read": true, "unix.Write": true, "unix.Writev": true, "unix.Readv": true,
	"unix.EpollWait": true, "unix.Recvfrom": true, "unix.Sendto": true,
	"syscall.Read": true, "syscall.Write": true, "syscall.EpollWait": true,
}

// TestLoopsMakeNoSchedulerSyscalls fails when the code of the event loops
// (the server's, the generator's, this package's) calls one of
// blockingCalls: no test can tell a raw system call from another at run
// time, so the source is checked.
func TestLoopsMakeNoSchedulerSyscalls(t *testing.T) {
	for _, dir := range []string{".", "../server", "../loadtest"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			checkSyscalls(t, f)
		}
	}
}

func checkSyscalls(t *testing.T, path string) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(file, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); ok && blockingCalls[pkg.Name+"."+sel.Sel.Name] {
			t.Errorf("%s: %s.%s goes through entersyscall; use netpoll.Read/Write or a raw call", fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name)
		}
		return true
	})
}
