package testsupport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// JSEvent is an event of the JavaScript client (clients/js) as JSClient
// reports it: its type and what it carried.
type JSEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// JSClient is the JavaScript client of clients/js running in a Node
// process, in the rooms it was started with; every event it emits comes out
// on Events.
type JSClient struct {
	Events <-chan JSEvent
	cmd    *exec.Cmd
	stdin  *json.Encoder
}

// jsDriver runs the client and prints each of its events as a line of JSON;
// it sends what comes on its standard input as {"room":…,"text":…}.
const jsDriver = `
import { Client } from %q;
import { createInterface } from "node:readline";
const [url, name, ...rooms] = process.argv.slice(2);
const c = new Client({ url, name, presenceEvents: true, backoff: { initial: 50, max: 500 } });
const out = (type, data) => process.stdout.write(JSON.stringify({ type, data }) + "\n");
for (const t of ["message", "joined", "gap", "error", "state", "disconnect", "presence_join", "presence_leave"]) {
  c.on(t, (e) => out(t, t === "error" ? { code: e.code, message: e.message } : e));
}
for (const r of rooms) await c.join(r);
out("ready", { connection: c.connection });
createInterface({ input: process.stdin }).on("line", async (line) => {
  const { room, text } = JSON.parse(line);
  try { out("ack", await c.send(room, text)); } catch (e) { out("nack", { code: e.code, message: e.message }); }
});
`

// StartJSClient starts the JavaScript client of clients/js (its build in
// clients/js/dist) against the server at url (ws://host:port), joining
// rooms as name, and waits until it has joined them. Without Node or the
// build the test is skipped, or fails when the CI variable is set.
func StartJSClient(t testing.TB, url, name string, rooms ...string) *JSClient {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(root, "clients", "js", "dist", "index.js")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(dist)
	}
	if err != nil {
		msg := fmt.Sprintf("the JavaScript client cannot run (%v): install Node and run npm ci && npm run build in clients/js", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	script := filepath.Join(t.TempDir(), "driver.mjs")
	if err := os.WriteFile(script, fmt.Appendf(nil, jsDriver, "file://"+dist), 0o644); err != nil {
		t.Fatal(err)
	}
	var args []string
	if v, err := exec.Command(node, "-p", "process.versions.node").Output(); err == nil {
		// Node 20 has the WebSocket that Node 22 has built in behind a flag.
		if major, _ := strconv.Atoi(strings.Split(strings.TrimSpace(string(v)), ".")[0]); major < 22 {
			args = append(args, "--experimental-websocket")
		}
	}
	args = append(args, script, url, name)
	cmd := exec.Command(node, append(args, rooms...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	events := make(chan JSEvent, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e JSEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				events <- e
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
	})
	c := &JSClient{Events: events, cmd: cmd, stdin: json.NewEncoder(stdin)}
	if _, err := c.Next("ready", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// Send asks the client to send text into room; its "ack" or "nack" event
// answers.
func (c *JSClient) Send(room, text string) error {
	return c.stdin.Encode(map[string]string{"room": room, "text": text})
}

// Next returns the next event of type typ, skipping others, or an error
// after timeout or when the client has exited.
func (c *JSClient) Next(typ string, timeout time.Duration) (JSEvent, error) {
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-c.Events:
			if !ok {
				return JSEvent{}, fmt.Errorf("the JavaScript client exited before a %s event", typ)
			}
			if e.Type == typ {
				return e, nil
			}
		case <-deadline:
			return JSEvent{}, fmt.Errorf("no %s event from the JavaScript client within %v", typ, timeout)
		}
	}
}
