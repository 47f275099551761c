package testsupport

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The binary CI installs and the module the in-process server runs are
// one release: a fault seen against one is the other's too.
func TestNATSVersionIsThePinnedModule(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "github.com/nats-io/nats-server/v2 "+NATSVersion+"\n") {
		t.Errorf("go.mod does not pin github.com/nats-io/nats-server/v2 at %s (NATSVersion)", NATSVersion)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "nats-server/v2@"+NATSVersion) {
		t.Errorf(".ci/run does not install nats-server %s (NATSVersion)", NATSVersion)
	}
}

// Both servers take a publish and hand it to a subscriber, and JetStream
// answers on each.
func TestNATSServersRunWithJetStream(t *testing.T) {
	for _, c := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"in-process", func(t *testing.T) string { return StartNATS(t) }},
		{"binary", func(t *testing.T) string { return StartNATSProcess(t).URL() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			nc, err := nats.Connect(c.url(t))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			sub, err := nc.SubscribeSync("t.a")
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Publish("t.a", []byte("hi")); err != nil {
				t.Fatal(err)
			}
			m, err := sub.NextMsg(5 * time.Second)
			if err != nil || string(m.Data) != "hi" {
				t.Fatalf("got %v, %v; want hi", m, err)
			}
			js, err := nc.JetStream()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.AccountInfo(); err != nil {
				t.Fatalf("JetStream: %v", err)
			}
		})
	}
}

// A process killed and started again serves on the same port.
func TestNATSProcessRestarts(t *testing.T) {
	p := StartNATSProcess(t)
	p.Kill()
	if p.Pid() != 0 {
		t.Fatal("a killed server still has a pid")
	}
	p.Start()
	nc, err := nats.Connect(p.URL())
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	nc.Close()
}
