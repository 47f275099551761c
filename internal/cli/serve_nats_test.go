//go:build linux

package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/scalechat/scalechat/internal/broker"
)

// natsFlags are serve's flags of the NATS engine.
var natsFlags = []string{"nats", "nats-user", "nats-password", "nats-token", "nats-nkey", "nats-creds",
	"nats-ca", "nats-cert", "nats-key", "nats-replicas"}

// TestServeNATSFlags: each NATS flag reaches the server's configuration
// from the command line, its environment variable and the file's key of
// its name, with their precedence.
func TestServeNATSFlags(t *testing.T) {
	file := func(text string) string {
		p := filepath.Join(t.TempDir(), "scalechat.yaml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const urls = "nats://a:4222,nats://b:4222"
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want broker.NATSConfig
	}{
		{"defaults", nil, nil, broker.NATSConfig{Replicas: 1}},
		{"flags", []string{"--nats", urls, "--nats-user", "alice", "--nats-password", "pw", "--nats-replicas", "3",
			"--nats-ca", "ca.pem", "--nats-cert", "c.pem", "--nats-key", "k.pem"}, nil,
			broker.NATSConfig{URL: urls, User: "alice", Password: "pw", Replicas: 3, CA: "ca.pem", Cert: "c.pem", Key: "k.pem"}},
		{"environment", nil, map[string]string{"SCALECHAT_NATS": urls, "SCALECHAT_NATS_TOKEN": "tok", "SCALECHAT_NATS_REPLICAS": "3",
			"SCALECHAT_NATS_CA": "ca.pem"},
			broker.NATSConfig{URL: urls, Token: "tok", Replicas: 3, CA: "ca.pem"}},
		{"environment, the others", nil, map[string]string{"SCALECHAT_NATS_USER": "u", "SCALECHAT_NATS_PASSWORD": "p",
			"SCALECHAT_NATS_NKEY": "n.nk", "SCALECHAT_NATS_CREDS": "u.creds", "SCALECHAT_NATS_CERT": "c.pem", "SCALECHAT_NATS_KEY": "k.pem"},
			broker.NATSConfig{User: "u", Password: "p", NKey: "n.nk", Creds: "u.creds", Cert: "c.pem", Key: "k.pem", Replicas: 1}},
		{"file", []string{"--config", file("nats: " + urls + "\nnats-nkey: n.nk\nnats-creds: u.creds\nnats-replicas: 3\n" +
			"nats-user: u\nnats-password: p\nnats-token: t\nnats-ca: ca.pem\nnats-cert: c.pem\nnats-key: k.pem\n")}, nil,
			broker.NATSConfig{URL: urls, NKey: "n.nk", Creds: "u.creds", Replicas: 3, User: "u", Password: "p", Token: "t",
				CA: "ca.pem", Cert: "c.pem", Key: "k.pem"}},
		{"flag over environment over file", []string{"--config", file("nats: nats://file:4222\nnats-token: file\nnats-user: file\n"),
			"--nats", "nats://flag:4222"},
			map[string]string{"SCALECHAT_NATS": "nats://env:4222", "SCALECHAT_NATS_TOKEN": "env"},
			broker.NATSConfig{URL: "nats://flag:4222", Token: "env", User: "file", Replicas: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range natsFlags {
				if _, ok := tc.env[envName(name)]; !ok {
					t.Setenv(envName(name), "")
					os.Unsetenv(envName(name)) // restored by Setenv's cleanup
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			o := newServeFlags()
			cmd := newServeCmdOf(o)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := cmd.PreRunE(cmd, nil); err != nil {
				t.Fatal(err)
			}
			if len(o.config.errs) > 0 {
				t.Fatalf("file errors: %v", o.config.errs)
			}
			if !reflect.DeepEqual(o.cfg.NATS, tc.want) { // both without Room and Logger, nil
				t.Errorf("NATS config %+v\nwant        %+v", o.cfg.NATS, tc.want)
			}
		})
	}
}

// TestServeNATSFlagErrors: a NATS setting serve cannot run with is one
// line, exit 2, before anything starts.
func TestServeNATSFlagErrors(t *testing.T) {
	const u = "nats://127.0.0.1:1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"with redis", []string{"--redis", "redis://127.0.0.1:1/0", "--nats", u}, "the cluster runs on one engine: give --redis or --nats, not both"},
		{"replicas", []string{"--nats", u, "--nats-replicas", "2"}, "--nats-replicas must be 1 or 3, got 2"},
		{"replicas without --nats", []string{"--nats-replicas", "0"}, "--nats-replicas must be 1 or 3, got 0"},
		{"a bad URL", []string{"--nats", "127.0.0.1:4222"}, `the NATS URL "127.0.0.1:4222" is not a server's address such as nats://host:4222`},
		{"two ways to authenticate", []string{"--nats", u, "--nats-token", "t", "--nats-user", "u"}, "give one way to authenticate to NATS"},
		{"a password alone", []string{"--nats", u, "--nats-password", "p"}, "a NATS password needs its user"},
		{"a certificate without its key", []string{"--nats", u, "--nats-cert", "c.pem"}, "the NATS client certificate and its key go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			code := run(context.Background(), append([]string{"serve"}, tc.args...), nil, io.Discard, &stderr)
			if code != 2 || !strings.HasPrefix(stderr.String(), "scalechat: ") || strings.Count(stderr.String(), "\n") > 1 ||
				!strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q: want exit 2 and one line with %q", code, stderr.String(), tc.want)
			}
		})
	}
}

// TestServeNATSHelp: --help names every NATS flag with its environment
// variable, and the secrets ask for it.
func TestServeNATSHelp(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), []string{"serve", "--help"}, nil, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	help := out.String()
	for _, name := range natsFlags {
		if !strings.Contains(help, "--"+name+" ") || !strings.Contains(help, "(env "+envName(name)+")") {
			t.Errorf("--help lacks --%s or %s", name, envName(name))
		}
	}
	for _, name := range []string{"nats-password", "nats-token"} {
		usage := newServeFlagSet().Lookup(name).Usage
		if !strings.Contains(usage, "prefer the environment variable") {
			t.Errorf("--%s: %q does not point to the environment variable", name, usage)
		}
	}
}
