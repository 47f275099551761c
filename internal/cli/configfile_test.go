//go:build linux

package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

func noEnv(string) (string, bool) { return "", false }

// TestConfigFileSetsFlags: every kind of flag value, from the file.
func TestConfigFileSetsFlags(t *testing.T) {
	fs := newServeFlagSet()
	cf, errs := applyConfig(fs, []byte(`
addr: 127.0.0.1:9000
history: 7
max-queue: 1MiB
rate-limit: 2.5
ping-interval: 5s
compression: true
allowed-origins: [https://a.example, https://b.example]
namespaces:
  chat:
    history: 0
`), noEnv)
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	for name, want := range map[string]string{
		"addr": "127.0.0.1:9000", "history": "7", "max-queue": "1MiB", "rate-limit": "2.5", "ping-interval": "5s",
		"compression": "true", "allowed-origins": "[https://a.example,https://b.example]",
	} {
		if got := fs.Lookup(name).Value.String(); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if o := cf.namespaces["chat"]; o == nil || !o.HistorySet || o.History != 0 {
		t.Errorf("namespace chat = %+v, want history 0", o)
	}
}

// TestConfigFileErrors pins every error sentence of the file's own keys
// (the namespaces' are pinned in internal/namespace).
func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"unknown key", "bogus: 1", `line 1: unknown key "bogus": not a flag of scalechat serve, nor namespaces (scalechat serve --help lists them)`},
		{"underscores", "max_queue: 1MiB", `line 1: unknown key "max_queue": flags are spelled with dashes, max-queue`},
		{"not in a file", "config: other.yaml", `line 1: config cannot be set in the file: give it on the command line`},
		{"check-config", "check-config: true", `line 1: check-config cannot be set in the file: give it on the command line`},
		{"int", "history: lots", `line 1: history must be a whole number, got "lots"`},
		{"int from a float", "history: 1.5", `line 1: history must be a whole number, got 1.5`},
		{"float", "rate-limit: fast", `line 1: rate-limit must be a number, got "fast"`},
		{"bool", "compression: yes", `line 1: compression must be true or false, got "yes"`},
		{"duration", "ping-interval: 5", `line 1: ping-interval must be a duration such as 10s, 5m or 1h, got 5`},
		{"size", "max-queue: big", `line 1: max-queue must be a size such as 4096, 16KiB or 4MiB, got "big"`},
		{"list for a scalar", "addr: [a, b]", `line 1: addr must be a text value, got a list`},
		{"mapping", "history: {a: 1}", `line 1: history must be a whole number, got a mapping`},
		{"list of lists", "allowed-origins: [[a]]", `line 1: allowed-origins must be a list of values`},
		{"empty", "history:", `line 1: history has no value: give one, or leave the key out for the default`},
		{"twice", "history: 1\nhistory: 2", `line 2: history is set twice`},
		{"not a mapping", "- a\n- b", `line 1: the file must be a mapping of flag names to values, such as addr: 127.0.0.1:8080`},
		{"syntax", "a: [\n", `line 1: the file is not valid YAML: did not find expected node content`},
		{"a namespace's", "namespaces:\n  chat:\n    history: -1", `line 3: namespace "chat": history must be between 0 and 100000, got -1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := applyConfig(newServeFlagSet(), []byte(tc.text), noEnv)
			if len(errs) != 1 || errs[0].Error() != tc.want {
				t.Errorf("errors = %v\nwant   [%s]", errs, tc.want)
			}
		})
	}
}

// TestConfigPrecedence: flag > environment variable > file > default,
// through serve's own command (bindEnv, then the file).
func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "scalechat.yaml")
	if err := os.WriteFile(file, []byte("history: 50\nrate-limit: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		env   string
		want  string
		other string // rate-limit, which only the file sets
	}{
		{"default", nil, "", "100", "20"},
		{"file", []string{"--config", file}, "", "50", "5"},
		{"environment over file", []string{"--config", file}, "60", "60", "5"},
		{"flag over environment and file", []string{"--config", file, "--history", "70"}, "60", "70", "5"},
		{"flag over file", []string{"--history", "70", "--config", file}, "", "70", "5"},
		{"file named by the environment", nil, "", "50", "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("SCALECHAT_HISTORY", tc.env)
			}
			if tc.name == "file named by the environment" {
				t.Setenv("SCALECHAT_CONFIG", file)
			}
			cmd := newServeCmd()
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := cmd.PreRunE(cmd, nil); err != nil {
				t.Fatal(err)
			}
			if got := cmd.Flags().Lookup("history").Value.String(); got != tc.want {
				t.Errorf("history = %s, want %s", got, tc.want)
			}
			if got := cmd.Flags().Lookup("rate-limit").Value.String(); got != tc.other {
				t.Errorf("rate-limit = %s, want %s", got, tc.other)
			}
		})
	}
}

// TestCheckConfig runs scalechat serve --check-config: exit 0 and a line
// for a valid file, exit 2 and one line per error for one that is not,
// the settings' own checks included.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "history: 10\nnamespaces:\n  chat:\n    history: 0\n  news:\n    publish: backend\n")
	gated := write("gated.yaml", "namespaces:\n  gated:\n    join_hook: true\n    hooks: []\n  open:\n    hooks: [publish]\n")
	one := write("one.yaml", "namespaces:\n  chat:\n    history: 0\n")
	bad := write("bad.yaml", "history: -1\nbogus: 1\nnamespaces:\n  chat:\n    max_members: -1\n  sealed:\n    join_token: true\n  gated:\n    join_hook: true\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  []string
	}{
		{"valid", []string{"serve", "--check-config", good}, 0, []string{good + ": valid, 2 namespaces"}},
		{"one namespace", []string{"serve", "--check-config", one}, 0, []string{one + ": valid, 1 namespace"}},
		{"valid, by --config", []string{"serve", "--config", good, "--check-config"}, 0, []string{good + ": valid, 2 namespaces"}},
		{"invalid", []string{"serve", "--check-config", bad}, 2, []string{
			bad + `: line 2: unknown key "bogus": not a flag of scalechat serve, nor namespaces (scalechat serve --help lists them)`,
			bad + `: line 5: namespace "chat": max_members must be between 0 and 10000000, got -1`,
			bad + `: history must not be negative`,
			bad + `: namespace "sealed" needs a token naming its rooms (join_token), but the server checks no token: set --auth-jwt-secret, --auth-jwt-public-key or --auth-jwks-file`,
			bad + `: namespace "gated" needs the join hook's yes for each join (join_hook), but the server calls no join hook: set --hook-join`,
		}},
		{"join_hook with --hook-join", []string{"serve", "--check-config", gated, "--hook-join", "http://127.0.0.1:1/join", "--hook-secret", "sixteen-bytes-or-more"}, 0, []string{gated + ": valid, 2 namespaces"}},
		{"a flag makes it valid", []string{"serve", "--check-config", good, "--history", "-5"}, 2, []string{good + ": history must not be negative"}},
		{"no file", []string{"serve", "--check-config"}, 2, nil},
		{"a file not there", []string{"serve", "--check-config", filepath.Join(dir, "none.yaml")}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, nil, &out, &errOut)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errOut.String())
			}
			got := strings.Split(strings.TrimSpace(out.String()), "\n")
			if tc.out != nil && strings.Join(got, "\n") != strings.Join(tc.out, "\n") {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), strings.Join(tc.out, "\n"))
			}
			if code != 0 && !strings.HasPrefix(errOut.String(), "scalechat: ") {
				t.Errorf("stderr %q, want one sentence after scalechat:", errOut.String())
			}
		})
	}
}

// TestServeConfigNamespaces starts the real binary with --config: the
// file's namespace reaches the server (a client's message refused where
// only the backend publishes) and its flag values apply.
func TestServeConfigNamespaces(t *testing.T) {
	file := filepath.Join(t.TempDir(), "scalechat.yaml")
	if err := os.WriteFile(file, []byte("namespaces:\n  news:\n    publish: backend\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, addr, _ := startServe(t, nil, "--config", file)
	c, br, _, err := gws.Dialer{Protocols: []string{"scalechat.v1"}}.Dial(context.Background(), "ws://"+addr+"/ws/news:today")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// Frames that came with the upgrade's answer wait in br.
	conn := io.ReadWriter(c)
	if br != nil {
		conn = struct {
			io.Reader
			io.Writer
		}{io.MultiReader(br, c), c}
	}
	if b, err := wsutil.ReadServerText(conn); err != nil || !strings.Contains(string(b), `"type":"joined"`) {
		t.Fatalf("joining news:today: %s %v", b, err)
	}
	if err := wsutil.WriteClientText(conn, []byte(`{"text":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	b, err := wsutil.ReadServerText(conn)
	if err != nil || !strings.Contains(string(b), `"code":"backend_only"`) {
		t.Errorf("a client's message in news: %s %v, want the error backend_only", b, err)
	}
	if _, _, _, err := gws.Dial(context.Background(), "ws://"+addr+"/ws/other:r"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("a namespace not in the file: %v, want 400", err)
	}
}

// TestShippedConfigIsValid: the example file docs/config.md points to
// passes --check-config.
func TestShippedConfigIsValid(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--check-config", "../../deploy/scalechat.yaml"}, nil, &out, &errOut); code != 0 {
		t.Errorf("exit %d: %s%s", code, out.String(), errOut.String())
	}
}

// TestServeAndCheckConfigSayTheSame: a setting serve cannot start with (a
// file that is not there, a URL no request can be made to) is found by
// --check-config, and serve refuses it with the same sentences and the
// same exit code, 2, without starting.
func TestServeAndCheckConfigSayTheSame(t *testing.T) {
	file := filepath.Join(t.TempDir(), "good.yaml")
	if err := os.WriteFile(file, []byte("history: 10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "none.pem")
	secret := []string{"--webhook-secret", "sixteen-bytes-or-more"}
	for _, tc := range []struct {
		name string
		args []string
		want []string // in the lines, in order
	}{
		{"TLS files not there", []string{"--tls-cert", missing, "--tls-key", missing}, []string{"load the TLS certificate"}},
		{"JWT key not there", []string{"--auth-jwt-public-key", missing}, []string{"read the JWT public key"}},
		{"API key file not there", []string{"--api-key-file", missing}, []string{"cannot read the API key"}},
		{"hook URL with a bad escape", []string{"--hook-connect", "http://h/%zz"}, []string{`the connect hook's URL "http://h/%zz" is not an http:// or https:// URL`}},
		{"webhook URL with a bad escape", append([]string{"--webhook-url", "http://h/%zz"}, secret...), []string{`the webhook URL "http://h/%zz" is not an http:// or https:// URL`}},
		{"webhook URL with CR LF", append([]string{"--webhook-url", "http://h/a\r\nX-Evil: 1"}, secret...), []string{"the webhook URL"}},
		{"two at once", append([]string{"--tls-cert", missing, "--tls-key", missing, "--webhook-url", "http://h/%zz"}, secret...), []string{"load the TLS certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cout, cerr bytes.Buffer
			ccode := run(context.Background(), append([]string{"serve", "--check-config", file}, tc.args...), nil, &cout, &cerr)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var sout, serr bytes.Buffer
			scode := run(ctx, append([]string{"serve", "--config", file, "--addr", "127.0.0.1:0", "--metrics-addr", ""}, tc.args...), nil, &sout, &serr)
			if ccode != 2 || scode != 2 {
				t.Fatalf("exit %d (--check-config) and %d (serve), want 2 and 2; serve said %q", ccode, scode, serr.String())
			}
			if serr.String() != cout.String()+cerr.String() {
				t.Errorf("serve said\n%s\n--check-config said\n%s%s", serr.String(), cout.String(), cerr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(cout.String(), file+": "+w) {
					t.Errorf("--check-config said %q, want a line %q", cout.String(), file+": "+w)
				}
			}
		})
	}
}
