//go:build linux

package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	gws "github.com/gobwas/ws"

	"github.com/scalechat/scalechat/internal/auth"
	"github.com/scalechat/scalechat/internal/protocol"
	"github.com/scalechat/scalechat/internal/testsupport"
)

var testSecret = []byte("a test secret of 32 bytes, or so")

func mint(t *testing.T, sub string, rooms []string, ttl time.Duration) string {
	t.Helper()
	tok, err := auth.MintHS256(testSecret, sub, rooms, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func startAuthServer(t *testing.T) *testServer {
	v, err := auth.NewHS256(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, func(c *Config) { c.Auth = v })
}

func TestAuthRefusesBadTokensBeforeTheUpgrade(t *testing.T) {
	ts := startAuthServer(t)
	forged, _ := auth.MintHS256([]byte("another secret entirely, 32 byte"), "alice", nil, time.Hour)
	tests := []struct {
		name   string
		path   string
		header http.Header
		status string
	}{
		{"no token", "/ws/a", nil, "401"},
		{"forged", "/ws/a?token=" + forged, nil, "401"},
		{"expired", "/ws/a?token=" + mint(t, "alice", nil, -time.Minute), nil, "401"},
		{"garbage", "/ws/a?token=xyz", nil, "401"},
		{"basic auth", "/ws/a", http.Header{"Authorization": {"Basic YTpi"}}, "401"},
		{"room not in the token", "/ws/c?token=" + mint(t, "alice", []string{"a", "b"}, time.Hour), nil, "403"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tryDial(t, ts.url(tt.path), tt.header); err == nil || !strings.Contains(err.Error(), tt.status) {
				t.Errorf("got %v, want %s", err, tt.status)
			}
		})
	}
	if st := ts.Stats(); st.Refused["auth"] != 5 || st.Refused["forbidden"] != 1 {
		t.Errorf("refused %v", st.Refused)
	}
}

func TestAuthSenderComesFromTheToken(t *testing.T) {
	ts := startAuthServer(t)
	alice := dial(t, ts.url("/ws/a?token="+mint(t, "alice", []string{"a", "b"}, time.Hour)))
	alice.joined()
	bob, err := tryDial(t, ts.url("/ws/a"), http.Header{"Authorization": {"Bearer " + mint(t, "bob", nil, time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	bob.joined()
	alice.sendJSON(msg("I am bob", "sender", "bob"))
	for _, c := range []*client{alice, bob} {
		if m := c.next(); m["sender"] != "alice" || m["text"] != "I am bob" {
			t.Errorf("got %v", m)
		}
	}
	alice.sendJSON(map[string]any{"type": "join", "room": "c"})
	if e := alice.nextOfType("error"); e["code"] != "forbidden" {
		t.Errorf("join outside the token's rooms: %v", e)
	}
	alice.sendJSON(map[string]any{"type": "join", "room": "b"})
	if j, _ := alice.joined(); j["room"] != "b" {
		t.Errorf("join b: %v", j)
	}
}

func TestAuthExpiryDuringConnectionCloses1008(t *testing.T) {
	ts := startAuthServer(t)
	c := dial(t, ts.url("/ws/a?token="+mint(t, "alice", nil, 1500*time.Millisecond)))
	c.joined()
	start := time.Now()
	if code := c.expectClose(); code != 1008 {
		t.Errorf("close %d, want 1008", code)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("closed %v after connecting, the token lived 1.5 s", d)
	}
}

func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, pool
}

func TestTLSEndToEnd(t *testing.T) {
	cfg, pool := selfSigned(t)
	ts := startServer(t, func(c *Config) { c.TLS = cfg })
	d := gws.Dialer{Timeout: 5 * time.Second, TLSConfig: &tls.Config{RootCAs: pool}, Protocols: []string{protocol.Subprotocol}}
	var cs []*client
	for range 2 {
		conn, r, _, err := d.Dial(context.Background(), "wss://"+ts.addr+"/ws/secure")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c := &client{t: t, conn: conn, r: r}
		c.joined()
		cs = append(cs, c)
	}
	big := strings.Repeat("é", 4000) // several TLS records
	cs[0].sendJSON(msg(big))
	for _, c := range cs {
		if m := c.next(); m["text"] != big {
			t.Errorf("got %d bytes", len(fmt.Sprint(m["text"])))
		}
	}
	cs[1].sendRaw(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, "")))
	if code := cs[1].expectClose(); code != 1000 {
		t.Errorf("close %d", code)
	}
	if _, err := tryDial(t, ts.url("/ws/plain"), nil); err == nil {
		t.Error("a plain ws:// connection was accepted by a TLS server")
	}
	// The TLS listener serves the page too.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get("https://" + ts.addr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("https healthz: %v", err)
	}
	resp.Body.Close()
}

func TestPerAddressLimits(t *testing.T) {
	t.Run("open connections", func(t *testing.T) {
		ts := startServer(t, func(c *Config) { c.MaxConnsPerIP = 2 })
		a, _ := connect(t, ts, "ip"), connect(t, ts, "ip")
		if _, err := tryDial(t, ts.url("/ws/ip"), nil); err == nil || !strings.Contains(err.Error(), "429") {
			t.Fatalf("third connection: %v", err)
		}
		a.sendRaw(gws.NewCloseFrame(gws.NewCloseFrameBody(1000, "")))
		a.expectClose()
		testsupport.Eventually(t, 15*time.Second, "the slot to be released", func() bool { return ts.Stats().Connections == 1 })
		connect(t, ts, "ip")
		if st := ts.Stats(); st.Refused["per_ip"] != 1 {
			t.Errorf("refused %v", st.Refused)
		}
	})
	t.Run("attempts per second", func(t *testing.T) {
		ts := startServer(t, func(c *Config) { c.ConnectRatePerIP = 1 }) // burst 2
		connect(t, ts, "rate")
		connect(t, ts, "rate")
		if _, err := tryDial(t, ts.url("/ws/rate"), nil); err == nil || !strings.Contains(err.Error(), "429") {
			t.Fatalf("third attempt at once: %v", err)
		}
		if st := ts.Stats(); st.Refused["connect_rate"] != 1 {
			t.Errorf("refused %v", st.Refused)
		}
	})
}

func TestSlowlorisDeadlines(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.FrameTimeout = 200 * time.Millisecond
		c.FirstFrameTimeout = 300 * time.Millisecond
	})
	// A frame that starts and never ends.
	slow := connect(t, ts, "s")
	if _, err := slow.conn.Write([]byte{0x81, 0x85, 1, 2}); err != nil { // half a header
		t.Fatal(err)
	}
	if code := slow.expectClose(); code != 1008 {
		t.Errorf("stalled frame: close %d, want 1008", code)
	}
	// A fragmented message that never ends, one fragment at a time.
	frag := connect(t, ts, "s")
	frag.sendRaw(gws.NewFrame(gws.OpText, false, []byte(`{"text":`)))
	if code := frag.expectClose(); code != 1008 {
		t.Errorf("stalled message: close %d, want 1008", code)
	}
	// A connection that never says anything.
	mute := connect(t, ts, "s")
	if code := mute.expectClose(); code != 1008 {
		t.Errorf("silent connection: close %d, want 1008", code)
	}
	// A connection that speaks in time is not touched.
	ok := connect(t, ts, "s")
	ok.sendJSON(msg("hi"))
	ok.next()
	time.Sleep(500 * time.Millisecond) // past both deadlines: elapsed time is what is tested
	ok.sendJSON(msg("still here"))
	if m := ok.next(); m["text"] != "still here" {
		t.Errorf("got %v", m)
	}
	if st := ts.Stats(); st.Dropped["timeout"] != 3 {
		t.Errorf("dropped %v", st.Dropped)
	}
}

func TestRoomAndHistoryCaps(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxRooms = 2; c.MaxHistoryBytes = 4000; c.RateLimit, c.RateBurst = 1000, 1000 })
	a := connect(t, ts, "one")
	connect(t, ts, "two")
	if _, err := tryDial(t, ts.url("/ws/three"), nil); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("third room: %v", err)
	}
	connect(t, ts, "two") // an existing room is fine
	a.sendJSON(map[string]any{"type": "join", "room": "three"})
	if e := a.nextOfType("error"); e["code"] != "rooms_full" {
		t.Errorf("join a third room: %v", e)
	}
	text := strings.Repeat("x", 200)
	for range 50 {
		a.sendJSON(msg(text))
		a.next()
	}
	if b := ts.hub.HistoryBytes(); b > 4000 || b < 3000 {
		t.Errorf("history holds %d bytes, cap 4000", b)
	}
	late := dial(t, ts.url("/ws/one"))
	_, hist := late.joined()
	if len(hist) < 10 || len(hist) > 17 {
		t.Errorf("late joiner got %d messages of ~250 bytes under a 4000-byte cap", len(hist))
	}
	if st := ts.Stats(); st.Refused["rooms_full"] != 1 || st.Dropped["forbidden"] != 1 {
		t.Errorf("refused %v dropped %v", st.Refused, st.Dropped)
	}
}
