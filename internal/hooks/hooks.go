// Package hooks calls the application's backend over HTTP at the moments
// where it may decide: a connection opening (connect), a connection
// joining a room (join) and a chat message being published (publish).
//
// Each hook is one URL. A call is a POST of one JSON object, signed with
// HMAC-SHA256 over the body (header Signature), naming the node (header
// Node); the backend answers 200 with a JSON object that allows or refuses,
// and for some hooks says more (docs/hooks.md). A call that fails (no
// answer within the timeout, a status other than 200, an answer that does
// not parse) is allowed or refused by the hook's Mode. A circuit breaker
// per hook stops calling a backend that failed Failures times in a row for
// Cooldown, then lets one trial through: a dead backend costs one timeout,
// not one per message.
//
// The package knows nothing of connections or rooms beyond their names: the
// server decides where a call runs (never on an event loop).
package hooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Kind names a hook.
type Kind uint8

// The hooks.
const (
	Connect Kind = iota
	Join
	Publish
	numKinds
)

var kindNames = [numKinds]string{"connect", "join", "publish"}

// String is the hook's name, as in metrics and docs.
func (k Kind) String() string { return kindNames[k] }

// Mode says what a failed call decides.
type Mode uint8

const (
	// FailClosed refuses what the backend could not answer for (the default:
	// a backend that gates access keeps gating it when it is down).
	FailClosed Mode = iota
	// FailOpen allows it, as if the hook were off.
	FailOpen
)

// ParseMode reads "open" or "closed".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "closed":
		return FailClosed, nil
	case "open":
		return FailOpen, nil
	}
	return 0, fmt.Errorf("hook failure mode %q is not open or closed", s)
}

// String is "open" or "closed".
func (m Mode) String() string {
	if m == FailOpen {
		return "open"
	}
	return "closed"
}

// Headers of every request.
const (
	// HeaderSignature holds "sha256=" and the hex HMAC-SHA256 of the body
	// under the shared secret (absent without a secret).
	HeaderSignature = "X-Scalechat-Signature"
	// HeaderNode names the node that calls.
	HeaderNode = "X-Scalechat-Node"
	// HeaderHook names the hook (connect, join, publish).
	HeaderHook = "X-Scalechat-Hook"
)

// Config is the hooks' settings: the server's HooksConfig. A hook whose URL
// is empty is off.
type Config struct {
	ConnectURL, JoinURL, PublishURL string
	Secret                          string        // signs every body (HMAC-SHA256); empty: unsigned
	Timeout                         time.Duration // per call; 0: DefaultTimeout
	Fail                            [numKinds]Mode
	Failures                        int           // failures in a row that open a hook's circuit; 0: DefaultFailures
	Cooldown                        time.Duration // how long an open circuit stays open; 0: DefaultCooldown
	// Workers is how many publish and join calls are in flight at once,
	// and how many connect calls: 0: DefaultWorkers, at most MaxWorkers.
	Workers int
}

// Defaults of Config's zero fields.
const (
	DefaultTimeout  = time.Second
	DefaultFailures = 5
	DefaultCooldown = 5 * time.Second
	DefaultWorkers  = 64
	// MaxWorkers bounds Workers: each worker is a goroutine, a kept-alive
	// connection to the backend and 16 queued calls; 100,000 of them cost
	// half a gigabyte idle, and a backend does not take that many calls at
	// once anyway.
	MaxWorkers = 4096
)

// MinSecret is the shortest secret accepted.
const MinSecret = 16

// Any reports whether any hook is on.
func (c *Config) Any() bool { return c.ConnectURL != "" || c.JoinURL != "" || c.PublishURL != "" }

// SetFail sets the failure mode of every hook.
func (c *Config) SetFail(m Mode) {
	for k := range c.Fail {
		c.Fail[k] = m
	}
}

// Validate reports what is wrong with the settings, one sentence per error.
func (c *Config) Validate() error {
	var errs []error
	for k, u := range c.urls() {
		if u != "" && !ValidURL(u) {
			errs = append(errs, fmt.Errorf("the %s hook's URL %q is not an http:// or https:// URL", Kind(k), u))
		}
	}
	if c.Secret != "" && len(c.Secret) < MinSecret {
		errs = append(errs, fmt.Errorf("the hook secret must be at least %d bytes", MinSecret))
	}
	if c.Timeout < 0 || c.Cooldown < 0 || c.Failures < 0 || c.Workers < 0 {
		errs = append(errs, errors.New("hook timeout, cooldown, failures and workers must not be negative"))
	}
	if c.Workers > MaxWorkers {
		errs = append(errs, fmt.Errorf("hook workers must be at most %d, got %d", MaxWorkers, c.Workers))
	}
	return errors.Join(errs...)
}

func (c *Config) urls() [numKinds]string {
	return [numKinds]string{c.ConnectURL, c.JoinURL, c.PublishURL}
}

func (c *Config) fill() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Failures == 0 {
		c.Failures = DefaultFailures
	}
	if c.Cooldown == 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
}

// Client calls the backend's hooks. It is safe for concurrent use.
type Client struct {
	cfg   Config
	node  string
	http  *http.Client
	hooks [numKinds]*hook
	// connects holds a token per connect call in flight: at most Workers,
	// like the join and publish calls, whatever the upgrades coming in.
	connects chan struct{}
}

// hook is one hook's URL, breaker and counters; nil when the hook is off.
type hook struct {
	kind  Kind
	url   string
	mode  Mode
	br    breaker
	stats stats
}

// New returns a client of the hooks cfg turns on, calling as node.
func New(cfg Config, node string) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	// Keep-alive connections for as many calls as may run at once: a call
	// costs a round trip, not a TCP (or TLS) handshake.
	tr := &http.Transport{
		Proxy:               nil, // the backend is the operator's own: no proxy from the environment
		DialContext:         (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        cfg.Workers + 16,
		MaxIdleConnsPerHost: cfg.Workers + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	// A redirect is not followed: a 302 would turn the call into a bodiless
	// GET whose answer would be applied, a 307 would send the body and its
	// signature elsewhere. The 3xx comes back as an answer, a failed call.
	c := &Client{cfg: cfg, node: node, http: &http.Client{Transport: tr, CheckRedirect: noRedirect},
		connects: make(chan struct{}, cfg.Workers)}
	for k, u := range cfg.urls() {
		if u != "" {
			c.hooks[k] = &hook{kind: Kind(k), url: u, mode: cfg.Fail[k],
				br: breaker{threshold: cfg.Failures, cooldown: cfg.Cooldown}, stats: newStats()}
		}
	}
	return c, nil
}

// On reports whether hook k is on; a nil Client has none.
func (c *Client) On(k Kind) bool { return c != nil && c.hooks[k] != nil }

// Workers is how many publish and join calls may run at once.
func (c *Client) Workers() int { return c.cfg.Workers }

// Close closes the idle connections to the backend.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Verdict is what a call decided.
type Verdict struct {
	Allow   bool    // go ahead: the backend allowed, or the call failed and the hook fails open
	Outcome Outcome // what happened, as counted
	Reason  string  // a refusal's reason for the client: the backend's, or why the hook failed
	Err     error   // the failure, when Outcome is Error, Timeout or OpenCircuit
}

// Failed reports whether the backend gave no valid answer.
func (v Verdict) Failed() bool { return v.Err != nil }

// FailReason is the reason a client is given when a hook it needs failed.
const FailReason = "the application's backend did not answer: try again later"

// answer is the part every hook's answer shares.
type answer interface {
	verdict() (allow bool, reason string)
}

// call posts req to hook k and decodes the answer into ans, through the
// breaker, and counts the outcome. check, when set, refuses an answer the
// server cannot apply (a failed call) and says whether an allowing answer
// is Allowed or Replaced.
func (c *Client) call(ctx context.Context, k Kind, req any, ans answer, check func() (Outcome, error)) Verdict {
	h := c.hooks[k]
	now := time.Now()
	if !h.br.allow(now) {
		err := fmt.Errorf("the %s hook's circuit is open after %d failures in a row", k, c.cfg.Failures)
		return h.fail(OpenCircuit, err)
	}
	err := c.post(ctx, h, req, ans)
	allowed := Allowed
	if err == nil && check != nil {
		allowed, err = check()
	}
	h.stats.observe(time.Since(now))
	h.br.done(err == nil, time.Now())
	if err != nil {
		out := Error
		if errors.Is(err, context.DeadlineExceeded) {
			out = Timeout
		}
		return h.fail(out, err)
	}
	allow, reason := ans.verdict()
	if !allow {
		if reason == "" {
			reason = "refused by the application"
		}
		h.stats.count(Refused)
		return Verdict{Outcome: Refused, Reason: reason}
	}
	h.stats.count(allowed)
	return Verdict{Allow: true, Outcome: allowed}
}

// fail counts a failed call and decides by the hook's mode.
func (h *hook) fail(out Outcome, err error) Verdict {
	h.stats.count(out)
	return Verdict{Allow: h.mode == FailOpen, Outcome: out, Reason: FailReason, Err: err}
}

// post sends one signed request and decodes a 200 answer into ans.
func (c *Client) post(ctx context.Context, h *hook, req, ans any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode the %s hook's request: %w", h.kind, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the %s hook's request: %w", h.kind, err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(HeaderNode, c.node)
	r.Header.Set(HeaderHook, h.kind.String())
	if c.cfg.Secret != "" {
		r.Header.Set(HeaderSignature, Sign(c.cfg.Secret, body))
	}
	resp, err := c.http.Do(r)
	if err != nil {
		return fmt.Errorf("the %s hook: %w", h.kind, err)
	}
	defer resp.Body.Close()
	// Read the whole (bounded) body so that the connection is reused.
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("the %s hook's answer: %w", h.kind, err)
	}
	if resp.StatusCode != http.StatusOK {
		return statusError(h.kind, resp)
	}
	if len(b) > maxAnswer {
		return fmt.Errorf("the %s hook's answer is larger than %d bytes", h.kind, maxAnswer)
	}
	if err := json.Unmarshal(b, ans); err != nil {
		return fmt.Errorf("the %s hook's answer is not the JSON expected: %w", h.kind, err)
	}
	return nil
}

// maxAnswer bounds an answer's body: a publish answer holds at most a
// replaced message.
const maxAnswer = 1 << 20

// Sign returns the value of HeaderSignature for body under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig (a HeaderSignature value) signs body under
// secret, in constant time: what a backend checks.
func Verify(secret string, body []byte, sig string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(sig))
}

// noRedirect is an http.Client's CheckRedirect that follows none: the
// redirect itself is the answer.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// statusError says which status a hook answered, and where a redirect
// pointed: the operator sees the URL to fix.
func statusError(k Kind, resp *http.Response) error {
	if loc := resp.Header.Get("Location"); loc != "" {
		return fmt.Errorf("the %s hook answered HTTP %d, a redirect to %q (not followed: fix the hook's URL)", k, resp.StatusCode, loc)
	}
	return fmt.Errorf("the %s hook answered HTTP %d", k, resp.StatusCode)
}

// ValidURL reports whether s parses as an absolute http:// or https:// URL
// that a request can be made to (no bad escape, no control character, a
// host): what a hook's or the webhook's URL must be before the server
// starts, not found out at its first call.
func ValidURL(s string) bool {
	r, err := http.NewRequest(http.MethodPost, s, nil)
	return err == nil && (r.URL.Scheme == "http" || r.URL.Scheme == "https") && r.URL.Host != ""
}
