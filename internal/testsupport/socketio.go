package testsupport

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// SocketIOServer is deploy/socketio/server.js, a real socket.io 4 server
// (from its package-lock.json), running in Node on a loopback port.
type SocketIOServer struct {
	Addr string // host:port
}

// URL returns the server's WebSocket base URL (the load tester and the
// audit add /socket.io/ and the Engine.IO query).
func (s *SocketIOServer) URL() string { return "ws://" + s.Addr }

// StartSocketIO starts deploy/socketio/server.js on a free loopback port
// with extra flags (e.g. "--ping-interval", "300") and waits until it
// listens. Without Node or deploy/socketio/node_modules the test is
// skipped, or fails when the CI variable is set (CI runs npm ci there).
func StartSocketIO(t testing.TB, flags ...string) *SocketIOServer {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "socketio")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "socket.io", "package.json"))
	}
	if err != nil {
		msg := fmt.Sprintf("the Socket.IO server cannot run (%v): install Node and run npm ci in deploy/socketio", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cmd := exec.Command(node, append([]string{"server.js", "--host", "127.0.0.1", "--port", "0"}, flags...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	return &SocketIOServer{Addr: StartListening(t, cmd, "the Socket.IO server")}
}
