package testsupport

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

// A key written to a bucket kept on three servers outlives the server that
// led it: once the two left elect a leader, the key reads back and writes
// go on. How long that takes is logged: a node's lease kept in such a
// bucket must outlast it (docs/nats.md).
func TestNATSClusterKeepsAKeyWhenItsLeaderDies(t *testing.T) {
	ps := StartNATSCluster(t, 3)
	nc, err := nats.Connect(ClusterURL(ps))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "leases", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "node-a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	info, err := js.Stream(ctx, "KV_leases")
	if err != nil {
		t.Fatal(err)
	}
	leader := info.CachedInfo().Cluster.Leader
	killed := -1
	for i, p := range ps {
		if p.Name() == leader {
			killed = i
		}
	}
	if killed < 0 {
		t.Fatalf("the bucket's leader %q is none of the servers", leader)
	}
	// Through a server that stays: what is measured is the election, not
	// the client's reconnection to another server (2 s apart by default).
	other, err := nats.Connect(ps[(killed+1)%3].URL())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ojs, err := jetstream.New(other)
	if err != nil {
		t.Fatal(err)
	}
	okv, err := ojs.KeyValue(ctx, "leases")
	if err != nil {
		t.Fatal(err)
	}
	ps[killed].Kill()
	start := time.Now()
	for {
		c, cancelPut := context.WithTimeout(ctx, 250*time.Millisecond)
		_, err := okv.Put(c, "node-a", []byte("2"))
		cancelPut()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no write within a minute of the leader's death: %v", err)
		}
	}
	t.Logf("the bucket took writes again %v after its leader (%s) was killed", time.Since(start).Round(time.Millisecond), leader)
	e, err := okv.Get(ctx, "node-a")
	if err != nil || string(e.Value()) != "2" {
		t.Fatalf("after the failover: %v, %v; want 2", e, err)
	}
	ps[killed].Start()
}
