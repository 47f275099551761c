//go:build linux

package cli

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	gws "github.com/gobwas/ws"

	"github.com/scalechat/scalechat/internal/hooks"
)

var listenRE = regexp.MustCompile(`url=https?://([0-9.:]+)/`)

// startServe runs "scalechat serve" with args as a real process of the
// built binary and returns its address once it listens.
func startServe(t *testing.T, env []string, args ...string) (*exec.Cmd, string, <-chan string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "scalechat")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/scalechat").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 100)
	addr := make(chan string, 1)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case a := <-addr:
		return cmd, a, lines
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start")
	}
	return nil, "", nil
}

func TestServeRequiresTokensFromTheEnvironmentSecret(t *testing.T) {
	const secret = "a secret of at least sixteen bytes"
	_, addr, _ := startServe(t, []string{"SCALECHAT_AUTH_JWT_SECRET=" + secret})
	if _, _, _, err := gws.Dial(context.Background(), "ws://"+addr+"/ws/a"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without a token: %v", err)
	}
	var out strings.Builder
	if code := run(context.Background(), []string{"token", "--secret", secret, "--sub", "alice", "--rooms", "a"}, nil, &out, io.Discard); code != 0 {
		t.Fatalf("token exit %d", code)
	}
	conn, _, _, err := gws.Dial(context.Background(), "ws://"+addr+"/ws/a?token="+strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("with the minted token: %v", err)
	}
	conn.Close()
}

func TestServeSIGTERMClosesClients1001AndExits0(t *testing.T) {
	cmd, addr, _ := startServe(t, nil, "--shutdown-timeout", "5s")
	conn, br, _, err := gws.Dial(context.Background(), "ws://"+addr+"/ws/lobby")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var r io.Reader = conn
	if br != nil {
		r = io.MultiReader(br, conn)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		//lint:ignore SA1019 the peer is our own server, whose frames are small
		f, err := gws.ReadFrame(r)
		if err != nil {
			t.Fatalf("want a close frame: %v", err)
		}
		if f.Header.OpCode == gws.OpClose {
			if code := int(f.Payload[0])<<8 | int(f.Payload[1]); code != 1001 {
				t.Errorf("close %d, want 1001", code)
			}
			break
		}
	}
	_ = gws.WriteFrame(conn, gws.MaskFrameInPlace(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, ""))))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v, want status 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("still answering after exit")
	}
}

func TestServeAPIKeyFromAFile(t *testing.T) {
	const key = "a-key-read-from-a-file-0123"
	file := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, addr, _ := startServe(t, nil, "--api-key-file", file)
	for _, tc := range []struct {
		key  string
		want int
	}{{key, 200}, {key + "x", 401}, {"", 401}} { // the file's new line is not part of the key
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/node", nil)
		req.Header.Set("X-API-Key", tc.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("key %q: %d, want %d", tc.key, resp.StatusCode, tc.want)
		}
	}
}

func TestServeRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--max-message-size", "lots"},
		{"serve", "--tls-cert", "x.pem"},
		{"serve", "--auth-jwt-secret", "short"},
		{"serve", "--auth-jwt-secret", "0123456789abcdef", "--auth-jwks-file", "k.json"},
		{"serve", "--pong-timeout", "1s", "--ping-interval", "2s"},
		{"serve", "--api-key", "short"},
		{"serve", "--api-key-file", "/nonexistent/key"},
		{"serve", "--api-key", "0123456789abcdef", "--api-key-file", "k"},
		{"serve", "--hook-fail", "maybe"},
		{"serve", "--hook-fail-publish", "half"},
		{"serve", "--hook-publish", "ftp://127.0.0.1/p"},
		{"serve", "--hook-publish", "http://127.0.0.1:1/p", "--hook-secret", "short"},
	} {
		var stderr strings.Builder
		if code := run(context.Background(), args, nil, io.Discard, &stderr); code != 2 || !strings.HasPrefix(stderr.String(), "scalechat: ") || strings.Count(stderr.String(), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q: want one clear line", args, code, stderr.String())
		}
	}
}

// TestServeRoomOrderRemoved: the removed --room-order is out of --help;
// given, owner (what every node does) is accepted with a warning, and
// redis, the order removed, is refused in one line that says so.
func TestServeRoomOrderRemoved(t *testing.T) {
	for _, tc := range []struct{ order, err, warn string }{
		{"", "", ""},
		{"owner", "", "--room-order is deprecated and does nothing"},
		{"redis", "the Redis room order was removed in", ""},
		{"fast", `--room-order "fast": the flag was removed`, ""},
	} {
		var log strings.Builder
		err := checkRoomOrder(tc.order, slog.New(slog.NewTextHandler(&log, nil)))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("--room-order %q: error %v, want %q", tc.order, err, tc.err)
		}
		if tc.warn == "" && log.Len() != 0 || !strings.Contains(log.String(), tc.warn) {
			t.Errorf("--room-order %q: logged %q, want %q", tc.order, log.String(), tc.warn)
		}
	}
	var stderr strings.Builder
	args := []string{"serve", "--room-order", "redis"}
	if code := run(context.Background(), args, nil, io.Discard, &stderr); code != 2 || strings.Count(stderr.String(), "\n") > 1 ||
		!strings.Contains(stderr.String(), "the Redis room order was removed in") {
		t.Errorf("%v: exit %d, stderr %q: want one line saying the order was removed", args, code, stderr.String())
	}
	var help strings.Builder
	if code := run(context.Background(), []string{"serve", "--help"}, nil, &help, io.Discard); code != 0 || strings.Contains(help.String(), "room-order") {
		t.Errorf("serve --help (exit %d) lists --room-order", code)
	}
}

func TestServeHookFailModes(t *testing.T) {
	for _, tc := range []struct {
		all  string
		each [3]string
		want [3]hooks.Mode
	}{
		{"closed", [3]string{}, [3]hooks.Mode{hooks.FailClosed, hooks.FailClosed, hooks.FailClosed}},
		{"open", [3]string{}, [3]hooks.Mode{hooks.FailOpen, hooks.FailOpen, hooks.FailOpen}},
		{"closed", [3]string{"", "", "open"}, [3]hooks.Mode{hooks.FailClosed, hooks.FailClosed, hooks.FailOpen}},
		{"open", [3]string{"closed", "", ""}, [3]hooks.Mode{hooks.FailClosed, hooks.FailOpen, hooks.FailOpen}},
	} {
		o := serveFlags{hookFail: tc.all, hookFailEach: tc.each}
		if err := o.hookModes(); err != nil || o.cfg.Hooks.Fail != tc.want {
			t.Errorf("--hook-fail %s %v: %v %v, want %v", tc.all, tc.each, o.cfg.Hooks.Fail, err, tc.want)
		}
	}
}
