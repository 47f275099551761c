package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// bunPath is the Bun binary npm ci installs in deploy/bun, relative to the
// repository root (scenarios/bun.yaml names the same path).
const bunPath = "deploy/bun/node_modules/@oven/bun-linux-x64/bin/bun"

// needBun returns the repository root once deploy/bun's Bun is installed;
// without it the test is skipped, or fails when the CI variable is set
// (.ci/run runs npm ci there).
func needBun(t *testing.T) string {
	t.Helper()
	root := repoFile(t, "")
	if _, err := os.Stat(filepath.Join(root, bunPath)); err != nil {
		msg := fmt.Sprintf("Bun cannot run (%v): run npm ci in deploy/bun (x86-64 Linux)", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return root
}

// startBun starts deploy/bun/server.js on a free loopback port and returns
// its host:port once it listens; it is stopped with SIGTERM after the test.
func startBun(t *testing.T) string {
	root := needBun(t)
	cmd := exec.Command(filepath.Join(root, bunPath), "deploy/bun/server.js", "--port", "0")
	cmd.Dir, cmd.Stderr = root, os.Stderr
	return testsupport.StartListening(t, cmd, "the Bun server")
}

// The Bun server speaks what the scalechat adapter of the load tester
// expects (docs/protocol.md): joined with the room and its latest seq, chat
// messages to every member with the room's next seq, error frames with
// scalechat's codes, HTTP 400 for a bad room name.
func TestBunServerProtocol(t *testing.T) {
	addr := startBun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := testsupport.DialWS(ctx, "ws://"+addr+"/ws/r1")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if j, err := a.ReadType("joined", 5*time.Second); err != nil || j.Room != "r1" || j.Seq != 0 {
		t.Fatalf("joined = %+v, %v; want room r1, seq 0", j, err)
	}
	for i, text := range []string{"one", "two"} {
		if err := a.Send(text); err != nil {
			t.Fatal(err)
		}
		m, err := a.Read(5 * time.Second)
		if err != nil || m.Type != "" || m.Room != "r1" || m.Seq != uint64(i+1) || m.Text != text {
			t.Fatalf("echo of %q = %+v, %v; want seq %d in r1", text, m, err, i+1)
		}
	}
	b, err := testsupport.DialWS(ctx, "ws://"+addr+"/ws/r1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if j, err := b.ReadType("joined", 5*time.Second); err != nil || j.Seq != 2 {
		t.Fatalf("second joined = %+v, %v; want the room's latest seq 2", j, err)
	}
	if err := b.Send("three"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*testsupport.WSConn{"sender": b, "other member": a} {
		if m, err := c.Read(5 * time.Second); err != nil || m.Seq != 3 || m.Text != "three" {
			t.Errorf("%s got %+v, %v; want seq 3", name, m, err)
		}
	}
	for _, tt := range []struct {
		frame any
		code  string
	}{
		{json.RawMessage(`[1]`), "invalid_json"},
		{map[string]any{"type": "join", "room": "r2"}, "unknown_type"},
		{map[string]any{"text": 7}, "invalid_message"},
		{map[string]any{"text": "x", "message_id": -1}, "invalid_message"},
		{map[string]any{"text": "x", "room": "r2"}, "not_joined"},
		{map[string]any{"text": "x", "room": "no room!"}, "invalid_room"},
	} {
		if err := a.SendFrame(tt.frame); err != nil {
			t.Fatal(err)
		}
		if e, err := a.Read(5 * time.Second); err != nil || e.Type != "error" || e.Code != tt.code {
			t.Errorf("%v answered %+v, %v; want error %s", tt.frame, e, err, tt.code)
		}
	}
	if _, err := testsupport.DialWS(ctx, "ws://"+addr+"/ws/bad%20room"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("bad room name: %v, want HTTP 400", err)
	}
}

// scenarios/bun.yaml at smoke size: both targets, every step, every
// message delivered once and the server figures measured.
func TestBunCompareSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers and two load generators")
	}
	root := needBun(t)
	if stdout := compareSmoke(t, root, "scenarios/bun.yaml"); !strings.Contains(stdout, "server costs over the first target's") {
		t.Error("no ratios under the table")
	}
}
