//go:build linux

package server

import (
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/broker"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestNATSConfig: the NATS engine's settings as Validate and New check
// them: one engine at most, replicas 1 or 3, the connection's own errors
// (broker.NATSConfig.Check); webhooks on a NATS cluster are valid.
func TestNATSConfig(t *testing.T) {
	const u = "nats://127.0.0.1:4222"
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string // "" valid
	}{
		{"off", func(*Config) {}, ""},
		{"on", func(c *Config) { c.NATS = broker.NATSConfig{URL: u, User: "u", Password: "p", Replicas: 3} }, ""},
		{"with redis", func(c *Config) { c.Redis, c.NATS.URL = "redis://127.0.0.1:6379/0", u },
			"the cluster runs on one engine: give --redis or --nats, not both"},
		{"replicas", func(c *Config) { c.NATS = broker.NATSConfig{URL: u, Replicas: 2} }, "NATS replicas must be 1 or 3, got 2"},
		{"replicas without NATS", func(c *Config) { c.NATS.Replicas = 5 }, "NATS replicas must be 1 or 3, got 5"},
		{"replicas 1 without NATS", func(c *Config) { c.NATS.Replicas = 1 }, ""},
		{"a bad URL", func(c *Config) { c.NATS.URL = "http://h" }, `the NATS URL "http://h" is not a server's address`},
		{"two ways to authenticate", func(c *Config) { c.NATS = broker.NATSConfig{URL: u, Token: "t", NKey: "seed"} },
			"give one way to authenticate to NATS"},
		{"webhooks", func(c *Config) {
			c.NATS.URL = u
			c.Webhook = WebhookConfig{URL: "http://127.0.0.1:1/hook", Secret: testWebhookSecret}
		}, ""},
		{"webhooks on redis", func(c *Config) {
			c.Redis = "redis://127.0.0.1:6379/0"
			c.Webhook = WebhookConfig{URL: "http://127.0.0.1:1/hook", Secret: testWebhookSecret}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.set(&cfg)
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate = %v, want valid", err)
			case tc.want == "":
				return
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			case strings.Count(err.Error(), "\n") > 0:
				t.Errorf("Validate = %q, want one sentence", err)
			}
			// New refuses the same, before it starts anything.
			if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestNATSWebhooksNeverInMemory: a NATS cluster's webhooks are the NATS
// state, never a single node's Memory, which would send every event once
// per node: with no NATS to reach, newWebhooks fails rather than fall
// back to one.
func TestNATSWebhooksNeverInMemory(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NATS.URL = "nats://" + testsupport.FreeAddr(t)
	cfg.Webhook = WebhookConfig{URL: "http://127.0.0.1:1/hook", Secret: testWebhookSecret}
	w, err := newWebhooks(cfg)
	if err == nil || !strings.Contains(err.Error(), "connect to NATS") || w != nil {
		t.Fatalf("newWebhooks = %v, %v; want no NATS to connect to", w, err)
	}
}

// TestClustered: either engine makes the node one of a cluster.
func TestClustered(t *testing.T) {
	for _, tc := range []struct {
		cfg    Config
		want   bool
		engine string
	}{
		{Config{}, false, ""},
		{Config{Redis: "redis://h:6379/0"}, true, "redis"},
		{Config{NATS: broker.NATSConfig{URL: "nats://h:4222"}}, true, "nats"},
	} {
		if got := tc.cfg.clustered(); got != tc.want {
			t.Errorf("%+v: clustered %v, want %v", tc.cfg, got, tc.want)
		}
		if got := tc.cfg.engine(); got != tc.engine {
			t.Errorf("%+v: engine %q, want %q", tc.cfg, got, tc.engine)
		}
	}
}
