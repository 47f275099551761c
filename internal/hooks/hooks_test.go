package hooks

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const secret = "0123456789abcdef-secret"

// backend is a real HTTP server that answers every hook with answer, after
// checking the request's signature and headers; it counts the calls and
// the TCP connections they came on.
type backend struct {
	*httptest.Server
	calls, conns atomic.Int64
	last         atomic.Value // the last request's body
}

func newBackend(t *testing.T, answer func(hook string, body []byte) (int, string)) *backend {
	t.Helper()
	b := &backend{}
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.calls.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
			return
		}
		b.last.Store(body)
		if !Verify(secret, body, r.Header.Get(HeaderSignature)) {
			t.Errorf("bad signature %q", r.Header.Get(HeaderSignature))
		}
		if r.Header.Get(HeaderNode) != "node1" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("headers %v", r.Header)
		}
		status, ans := answer(r.Header.Get(HeaderHook), body)
		w.WriteHeader(status)
		io.WriteString(w, ans)
	}))
	b.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.conns.Add(1)
		}
	}
	b.Start()
	t.Cleanup(b.Close)
	return b
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	cfg.Secret = secret
	c, err := New(cfg, "node1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func outcomes(c *Client, hook string) map[string]uint64 {
	m := map[string]uint64{}
	for _, st := range c.Stats() {
		if st.Hook == hook {
			for o, n := range st.Outcomes {
				if n > 0 {
					m[Outcome(o).String()] = n
				}
			}
		}
	}
	return m
}

func TestPublishAnswers(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		answer  string
		allow   bool
		outcome Outcome
		reason  string
		message string
	}{
		{"allowed", 200, `{"allow":true}`, true, Allowed, "", `{"text":"hi","message_id":7}`},
		{"refused", 200, `{"allow":false,"reason":"no swearing"}`, false, Refused, "no swearing", ""},
		{"refused without a reason", 200, `{"allow":false}`, false, Refused, "refused by the application", ""},
		{"replaced keeps message_id", 200, `{"allow":true,"message":{"text":"h*"}}`, true, Replaced, "", `{"message_id":7,"text":"h*"}`},
		{"replaced with its own id", 200, `{"allow":true,"message":{"text":"h*","message_id":9}}`, true, Replaced, "", `{"text":"h*","message_id":9}`},
		{"replacement not a chat message", 200, `{"allow":true,"message":{"type":"join","room":"a"}}`, false, Error, FailReason, ""},
		{"replacement without text", 200, `{"allow":true,"message":{"sender":"x"}}`, false, Error, FailReason, ""},
		{"HTTP 500", 500, `oops`, false, Error, FailReason, ""},
		{"not JSON", 200, `allow`, false, Error, FailReason, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, func(string, []byte) (int, string) { return tc.status, tc.answer })
			c := newClient(t, Config{PublishURL: b.URL})
			msg, v := c.Publish(context.Background(), PublishRequest{Connection: "c1", User: "ann", Room: "lobby",
				Message: json.RawMessage(`{"text":"hi","message_id":7}`)})
			if v.Allow != tc.allow || v.Outcome != tc.outcome || v.Reason != tc.reason {
				t.Fatalf("verdict %+v, want allow %v outcome %v reason %q", v, tc.allow, tc.outcome, tc.reason)
			}
			if tc.message != "" && string(msg) != tc.message {
				t.Errorf("message %s, want %s", msg, tc.message)
			}
			if got := outcomes(c, "publish"); got[tc.outcome.String()] != 1 || len(got) != 1 {
				t.Errorf("outcomes %v", got)
			}
			var req PublishRequest
			if err := json.Unmarshal(b.last.Load().([]byte), &req); err != nil {
				t.Fatal(err)
			}
			if req.Hook != "publish" || req.Node != "node1" || req.Room != "lobby" || req.User != "ann" || req.Connection != "c1" || req.Time == 0 {
				t.Errorf("request %+v", req)
			}
		})
	}
}

func TestConnectAnswers(t *testing.T) {
	cases := []struct {
		name    string
		answer  string
		allow   bool
		outcome Outcome
		status  int
	}{
		{"allowed with a user", `{"allow":true,"user":"ann","data":{"plan":"pro"},"rooms":["a","b"]}`, true, Allowed, 0},
		{"refused, default status", `{"allow":false,"reason":"banned"}`, false, Refused, 403},
		{"refused with a status", `{"allow":false,"reason":"who?","status":401}`, false, Refused, 401},
		{"status out of range", `{"allow":false,"status":500}`, false, Error, 0},
		{"user with a bidi override", `{"allow":true,"user":"\u202eann"}`, false, Error, 0},
		{"user too long", `{"allow":true,"user":"` + strings.Repeat("a", 65) + `"}`, false, Error, 0},
		{"bad room", `{"allow":true,"rooms":["a b"]}`, false, Error, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, func(string, []byte) (int, string) { return 200, tc.answer })
			c := newClient(t, Config{ConnectURL: b.URL})
			a, v := c.Connect(context.Background(), ConnectRequest{Room: "lobby"})
			if v.Allow != tc.allow || v.Outcome != tc.outcome || (!v.Allow && !v.Failed() && a.Status != tc.status) {
				t.Fatalf("verdict %+v answer %+v", v, a)
			}
			if tc.allow && (a.User != "ann" || len(a.Rooms) != 2 || string(a.Data) != `{"plan":"pro"}`) {
				t.Errorf("answer %+v", a)
			}
		})
	}
}

// TestFailModes: a backend that is down fails closed or open as configured.
func TestFailModes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/hook"
	ln.Close() // nothing listens there now: connection refused
	for _, mode := range []Mode{FailClosed, FailOpen} {
		c := newClient(t, Config{JoinURL: down, Fail: [numKinds]Mode{Join: mode}})
		v := c.Join(context.Background(), JoinRequest{Room: "a"})
		if v.Allow != (mode == FailOpen) || v.Outcome != Error || v.Err == nil {
			t.Errorf("%v: verdict %+v", mode, v)
		}
	}
}

// TestBreaker: a backend that does not answer costs one timeout per
// Failures calls, then every call fails at once until the cool-down ends;
// one trial goes through then, and a good answer closes the circuit.
func TestBreaker(t *testing.T) {
	var slow atomic.Bool
	slow.Store(true)
	release := make(chan struct{})
	b := newBackend(t, func(string, []byte) (int, string) {
		if slow.Load() {
			<-release
		}
		return 200, `{"allow":true}`
	})
	defer close(release)
	const timeout = 50 * time.Millisecond
	c := newClient(t, Config{PublishURL: b.URL, Timeout: timeout, Failures: 2, Cooldown: 300 * time.Millisecond})
	req := PublishRequest{Message: json.RawMessage(`{"text":"x"}`)}
	start := time.Now()
	for range 2 {
		if _, v := c.Publish(context.Background(), req); v.Outcome != Timeout || v.Allow {
			t.Fatalf("verdict %+v, want a timeout refused", v)
		}
	}
	opened := time.Now()
	for range 100 {
		if _, v := c.Publish(context.Background(), req); v.Outcome != OpenCircuit || v.Allow {
			t.Fatalf("verdict %+v, want an open circuit", v)
		}
	}
	if d := time.Since(opened); d > timeout {
		t.Errorf("100 calls on an open circuit took %v: they must not wait", d)
	}
	if n := b.calls.Load(); n != 2 {
		t.Errorf("the backend got %d calls, want 2", n)
	}
	if d := time.Since(start); d < 2*timeout {
		t.Errorf("two timeouts took %v", d)
	}
	slow.Store(false)
	time.Sleep(300*time.Millisecond - time.Since(opened) + 10*time.Millisecond) // the cool-down itself is what is tested
	if _, v := c.Publish(context.Background(), req); v.Outcome != Allowed {
		t.Fatalf("trial after the cool-down: %+v", v)
	}
	if _, v := c.Publish(context.Background(), req); v.Outcome != Allowed {
		t.Fatalf("after a good trial the circuit is closed: %+v", v)
	}
	got := outcomes(c, "publish")
	if got["timeout"] != 2 || got["open_circuit"] != 100 || got["allowed"] != 2 {
		t.Errorf("outcomes %v", got)
	}
}

func TestBreakerTrialFails(t *testing.T) {
	b := breaker{threshold: 3, cooldown: time.Second}
	now := time.Unix(0, 0)
	for range 3 {
		if !b.allow(now) {
			t.Fatal("closed circuit refused a call")
		}
		b.done(false, now)
	}
	if b.allow(now.Add(999 * time.Millisecond)) {
		t.Fatal("open circuit let a call through")
	}
	now = now.Add(time.Second)
	if !b.allow(now) || b.allow(now) {
		t.Fatal("after the cool-down exactly one trial goes through")
	}
	b.done(false, now)
	if b.allow(now.Add(999*time.Millisecond)) || !b.allow(now.Add(time.Second)) {
		t.Fatal("a failed trial opens the circuit for one more cool-down")
	}
}

// TestKeepAlive: calls reuse one pooled connection.
func TestKeepAlive(t *testing.T) {
	b := newBackend(t, func(string, []byte) (int, string) { return 200, `{"allow":true}` })
	c := newClient(t, Config{JoinURL: b.URL})
	for range 20 {
		if v := c.Join(context.Background(), JoinRequest{Room: "a"}); !v.Allow {
			t.Fatalf("%+v", v)
		}
	}
	if n := b.conns.Load(); n != 1 {
		t.Errorf("20 calls in a row opened %d connections, want 1", n)
	}
}

func TestSignature(t *testing.T) {
	body := []byte(`{"hook":"join"}`)
	sig := Sign(secret, body)
	// Pinned against an independent computation:
	// printf '%s' '{"hook":"join"}' | openssl dgst -sha256 -hmac 0123456789abcdef-secret
	if sig != "sha256=a80426c4bd5275b66c7596445280f84721f0b34bc70cefabf5500b159ec3f5fa" {
		t.Fatalf("signature %s", sig)
	}
	if !Verify(secret, body, sig) {
		t.Fatal("a signature does not verify")
	}
	if Verify(secret, []byte(`{"hook":"joi"}`), sig) || Verify("another-secret-16b", body, sig) {
		t.Error("a signature verifies another body or secret")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{ConnectURL: "ftp://x"}, "not an http"},
		{Config{JoinURL: "http://"}, "not an http"},
		{Config{JoinURL: "http://h/%zz"}, "not an http"},
		{Config{PublishURL: "http://h/a\r\nX-Evil: 1"}, "not an http"},
		{Config{PublishURL: "http://127.0.0.1:1/p", Secret: "short"}, "at least 16"},
		{Config{Timeout: -1}, "negative"},
		{Config{Workers: MaxWorkers + 1}, "at most 4096"},
		{Config{PublishURL: "https://backend.example/p", Secret: secret}, ""},
	}
	for _, tc := range cases {
		err := tc.cfg.Validate()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestRedirectIsAFailedCall: a hook that answers a redirect is a failed
// call (docs/hooks.md: any status but 200), its Location in the error, and
// the redirect's target never sees the call: a 302 is not followed as a
// bodiless GET whose answer would be applied, a 307 does not re-send the
// body and its signature elsewhere.
func TestRedirectIsAFailedCall(t *testing.T) {
	target := newBackend(t, func(string, []byte) (int, string) { return 200, `{"allow":true}` })
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			b := httptest.NewServer(http.RedirectHandler(target.URL+"/join", status))
			t.Cleanup(b.Close)
			c := newClient(t, Config{JoinURL: b.URL})
			v := c.Join(context.Background(), JoinRequest{Room: "a"})
			if v.Allow || v.Outcome != Error || v.Err == nil || !strings.Contains(v.Err.Error(), target.URL+"/join") {
				t.Errorf("verdict %+v, want a failed call naming the Location", v)
			}
		})
	}
	if n := target.calls.Load(); n != 0 {
		t.Errorf("the redirect's target got %d calls, want 0", n)
	}
}

// TestConnectCallsBounded: connect calls in flight are bounded by Workers,
// like join and publish calls: ten upgrades at once against a backend that
// holds its answers make two calls, then the others, as turns free up.
// (Unbounded, the backend gets a third call at once and answers them all.)
func TestConnectCallsBounded(t *testing.T) {
	release := make(chan struct{})
	var inFlight, most atomic.Int64
	var once sync.Once
	b := newBackend(t, func(string, []byte) (int, string) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if n > 2 {
			once.Do(func() { close(release) })
		}
		<-release
		return 200, `{"allow":true}`
	})
	c := newClient(t, Config{ConnectURL: b.URL, Workers: 2, Timeout: 10 * time.Second})
	timer := time.AfterFunc(time.Second, func() { once.Do(func() { close(release) }) }) // the bound held: let them through
	defer timer.Stop()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, v := c.Connect(context.Background(), ConnectRequest{Room: "a"}); !v.Allow {
				t.Errorf("%+v", v)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 2 {
		t.Errorf("%d connect calls in flight at once, want at most 2 (Workers)", m)
	}
}
