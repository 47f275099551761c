// Connecting to NATS: the servers of NATSConfig.URL, one way to
// authenticate, TLS, and reconnecting for ever (a node outlives a NATS
// server's restart or a cluster's election).

package broker

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

const (
	// natsReconnectWait is how long nats.go waits before trying a server
	// it was connected to again: short, since a node cut off from NATS
	// refuses messages to shared rooms until it is back.
	natsReconnectWait = 250 * time.Millisecond
	// natsReconnectBuf is what nats.go holds of a node's publishes while
	// it reconnects (its default: 8 MiB); past it a publish fails, which
	// the engine sees as it sees any failed round.
	natsReconnectBuf = 32 << 20
)

// natsSchemes are the URL schemes nats.go dials.
var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

// Check returns the configuration's errors that need neither its files nor
// a server: a malformed URL, two ways to authenticate, a password without
// a user, a client certificate without its key, replicas other than 1 or 3.
func (c NATSConfig) Check() error {
	_, err := c.servers()
	errs := []error{err}
	errs = append(errs, c.authErrors()...)
	if (c.Cert == "") != (c.Key == "") {
		errs = append(errs, errors.New("the NATS client certificate and its key go together: give both, or neither"))
	}
	if c.Replicas != 0 && c.Replicas != 1 && c.Replicas != 3 {
		errs = append(errs, fmt.Errorf("NATS replicas must be 1 or 3, got %d", c.Replicas))
	}
	return errors.Join(errs...)
}

// servers returns the URLs of c.URL, each checked.
func (c NATSConfig) servers() ([]string, error) {
	var urls []string
	ws := 0
	for _, s := range strings.Split(c.URL, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || !natsSchemes[u.Scheme] || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("the NATS URL %q is not a server's address such as nats://host:4222 (or tls://, ws://, wss://)", redactURL(s))
		}
		if p := u.Port(); p != "" && !validPort(p) {
			return nil, fmt.Errorf("the NATS URL %q has no valid port: nats://host:4222", redactURL(s))
		}
		if u.Scheme == "ws" || u.Scheme == "wss" {
			ws++
		}
		urls = append(urls, s)
	}
	switch {
	case len(urls) == 0:
		return nil, errors.New("no NATS server: give its URL, nats://host:4222[,…]")
	case ws > 0 && ws < len(urls):
		return nil, errors.New("the NATS URLs mix WebSocket (ws://, wss://) and plain servers, which nats.go cannot use together")
	}
	return urls, nil
}

func validPort(p string) bool {
	n := 0
	for _, r := range p {
		if r < '0' || r > '9' {
			return false
		}
		n = n*10 + int(r-'0')
		if n > 65535 {
			return false
		}
	}
	return n > 0
}

// redactURL hides a URL's password, for errors and logs, also in a URL
// that does not parse.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start := strings.Index(s, "://") + len("://")
	if start < len("://") || start > at {
		start = 0
	}
	if colon := strings.Index(s[start:at], ":"); colon >= 0 {
		return s[:start+colon] + ":xxxxx" + s[at:]
	}
	return s
}

// redactedURL is c.URL, every password hidden.
func (c NATSConfig) redactedURL() string {
	parts := strings.Split(c.URL, ",")
	for i, p := range parts {
		parts[i] = redactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// authErrors checks that at most one way to authenticate is given.
func (c NATSConfig) authErrors() []error {
	var errs []error
	given := 0
	for _, set := range []bool{c.User != "" || c.Password != "", c.Token != "", c.NKey != "", c.Creds != ""} {
		if set {
			given++
		}
	}
	if given > 1 {
		errs = append(errs, errors.New("give one way to authenticate to NATS: a user and password, a token, an NKey seed or a credentials file, not several"))
	}
	if c.Password != "" && c.User == "" {
		errs = append(errs, errors.New("a NATS password needs its user"))
	}
	if given > 0 {
		for _, s := range strings.Split(c.URL, ",") {
			if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
				errs = append(errs, fmt.Errorf("the NATS URL %q holds credentials, and others are given too: give them once", redactURL(strings.TrimSpace(s))))
				break
			}
		}
	}
	return errs
}

// options returns the nats.go options of c for a connection called name:
// its servers, its authentication, TLS, and reconnecting for ever. Files
// (NKey seed, credentials, CA, client certificate) are read now, so that a
// missing or malformed one is told before connecting.
func (c NATSConfig) options(name string) ([]nats.Option, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	urls, _ := c.servers()
	opts := []nats.Option{
		func(o *nats.Options) error { o.Servers = urls; return nil },
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(natsReconnectWait),
		nats.ReconnectBufSize(natsReconnectBuf),
	}
	switch {
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	case c.NKey != "":
		o, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("the NATS NKey seed %s: %w", c.NKey, err)
		}
		opts = append(opts, o)
	case c.Creds != "":
		// nats.go reads the file at each connection (a rotated one is
		// taken): read here once to tell a missing one now.
		if _, err := os.ReadFile(c.Creds); err != nil {
			return nil, fmt.Errorf("the NATS credentials file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	// nats.RootCAs and nats.ClientCert read their files as they are
	// applied: applied here once on a scratch copy, to tell a bad file
	// in a sentence of its own.
	if c.CA != "" {
		o := nats.RootCAs(c.CA)
		if err := o(&nats.Options{}); err != nil {
			return nil, fmt.Errorf("the NATS CA file %s: %w", c.CA, err)
		}
		opts = append(opts, o)
	}
	if c.Cert != "" {
		o := nats.ClientCert(c.Cert, c.Key)
		if err := o(&nats.Options{}); err != nil {
			return nil, fmt.Errorf("the NATS client certificate %s: %w", c.Cert, err)
		}
		opts = append(opts, o)
	}
	return opts, nil
}

// connectNATS connects to the servers of c as name, with c's options and
// then opts (handlers, most often).
func connectNATS(c NATSConfig, name string, opts ...nats.Option) (*nats.Conn, error) {
	own, err := c.options(name)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect("", append(own, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", c.redactedURL(), err)
	}
	return nc, nil
}

// ConnectNATS connects to the NATS servers of cfg as the connection name,
// with cfg's servers, authentication, TLS and reconnecting (as the broker's
// own connection), then opts: for a package outside the broker that keeps
// state of its own in the same NATS system (the webhooks).
func ConnectNATS(cfg NATSConfig, name string, opts ...nats.Option) (*nats.Conn, error) {
	return connectNATS(cfg, name, opts...)
}
