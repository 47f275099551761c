package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestNATSConnConfigErrors: every configuration error is one sentence,
// told before connecting (Check and options alike).
func TestNATSConnConfigErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none")
	notSeed := filepath.Join(dir, "not-a-seed")
	if err := os.WriteFile(notSeed, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const u = "nats://127.0.0.1:4222"
	for _, tc := range []struct {
		name string
		cfg  NATSConfig
		want string
	}{
		{"empty", NATSConfig{}, "no NATS server: give its URL"},
		{"commas alone", NATSConfig{URL: " , "}, "no NATS server: give its URL"},
		{"scheme", NATSConfig{URL: "redis://127.0.0.1:6379"}, `the NATS URL "redis://127.0.0.1:6379" is not a server's address such as nats://host:4222`},
		{"no scheme", NATSConfig{URL: "127.0.0.1:4222"}, `the NATS URL "127.0.0.1:4222" is not a server's address`},
		{"no host", NATSConfig{URL: "nats://:4222"}, `the NATS URL "nats://:4222" is not a server's address`},
		{"a path", NATSConfig{URL: "nats://h:4222/db"}, `is not a server's address`},
		{"the second", NATSConfig{URL: u + ",nats//h"}, `the NATS URL "nats//h" is not`},
		{"port", NATSConfig{URL: "nats://h:70000"}, `the NATS URL "nats://h:70000" has no valid port`},
		{"password hidden", NATSConfig{URL: "nats://u:secret@h:x"}, `"nats://u:xxxxx@h:x"`},
		{"password hidden, no scheme", NATSConfig{URL: "u:secret@h:4222"}, `"u:xxxxx@h:4222"`},
		{"mixed websocket", NATSConfig{URL: u + ",ws://h:80"}, "mix WebSocket"},
		{"user and token", NATSConfig{URL: u, User: "u", Password: "p", Token: "t"}, "give one way to authenticate to NATS"},
		{"token and nkey", NATSConfig{URL: u, Token: "t", NKey: "f"}, "give one way to authenticate to NATS"},
		{"nkey and creds", NATSConfig{URL: u, NKey: "f", Creds: "c"}, "give one way to authenticate to NATS"},
		{"password alone", NATSConfig{URL: u, Password: "p"}, "a NATS password needs its user"},
		{"credentials twice", NATSConfig{URL: "nats://u:p@h:4222", Token: "t"}, `the NATS URL "nats://u:xxxxx@h:4222" holds credentials, and others are given too`},
		{"cert without key", NATSConfig{URL: u, Cert: "c.pem"}, "the NATS client certificate and its key go together"},
		{"key without cert", NATSConfig{URL: u, Key: "k.pem"}, "the NATS client certificate and its key go together"},
		{"replicas", NATSConfig{URL: u, Replicas: 2}, "NATS replicas must be 1 or 3, got 2"},
		{"nkey file missing", NATSConfig{URL: u, NKey: missing}, "the NATS NKey seed " + missing + ":"},
		{"nkey file not a seed", NATSConfig{URL: u, NKey: notSeed}, "the NATS NKey seed " + notSeed + ":"},
		{"creds file missing", NATSConfig{URL: u, Creds: missing}, "the NATS credentials file:"},
		{"CA missing", NATSConfig{URL: u, CA: missing}, "the NATS CA file " + missing + ":"},
		{"CA not PEM", NATSConfig{URL: u, CA: notSeed}, "the NATS CA file " + notSeed + ":"},
		{"cert missing", NATSConfig{URL: u, Cert: missing, Key: missing}, "the NATS client certificate " + missing + ":"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.options("n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("options: %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
			if _, err := connectNATS(tc.cfg, "n"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("connectNATS: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestNATSConnOptions: a connection is named, reconnects for ever, soon,
// with a large buffer, to every server of the list.
func TestNATSConnOptions(t *testing.T) {
	url := testsupport.StartNATS(t)
	nc, err := connectNATS(NATSConfig{URL: " " + url + " , nats://127.0.0.1:1"}, "node-a", nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	o := nc.Opts
	if o.Name != "node-a" || o.MaxReconnect != -1 || o.ReconnectWait != natsReconnectWait || o.ReconnectBufSize != natsReconnectBuf || !o.AllowReconnect {
		t.Errorf("options: name %q, max reconnect %d, wait %s, buffer %d, reconnect %v", o.Name, o.MaxReconnect, o.ReconnectWait, o.ReconnectBufSize, o.AllowReconnect)
	}
	if strings.Join(o.Servers, ",") != url+",nats://127.0.0.1:1" {
		t.Errorf("servers %q", o.Servers)
	}
	if !o.NoRandomize {
		t.Error("the caller's option was not applied")
	}
}

// TestNATSConnNoServer: a server that is not there is told in a sentence
// that names it, the password hidden, and wraps nats.go's error.
func TestNATSConnNoServer(t *testing.T) {
	addr := testsupport.FreeAddr(t) // nothing listens there
	_, err := connectNATS(NATSConfig{URL: "nats://u:secret@" + addr}, "n")
	if err == nil || !strings.HasPrefix(err.Error(), "connect to NATS at nats://u:xxxxx@"+addr+": ") {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(err.Error(), "no servers available") {
		t.Errorf("err %v: want nats.go's error inside", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// TestNATSConnAuth: each way to authenticate, right and wrong, against a
// server that requires it.
func TestNATSConnAuth(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	user := func() nkeys.KeyPair {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	seedFile := func(name string, kp nkeys.KeyPair) string {
		seed, err := kp.Seed()
		if err != nil {
			t.Fatal(err)
		}
		return write(name, seed)
	}
	known, stranger := user(), user()
	knownPub, _ := known.PublicKey()
	op := newNATSOperator(t)
	creds := write("user.creds", op.creds(t))
	otherOp := newNATSOperator(t)
	strangerCreds := write("stranger.creds", otherOp.creds(t))

	userURL := testsupport.StartNATSWith(t, func(o *natsserver.Options) { o.Username, o.Password = "alice", "s3cret" })
	tokenURL := testsupport.StartNATSWith(t, func(o *natsserver.Options) { o.Authorization = "a-token" })
	nkeyURL := testsupport.StartNATSWith(t, func(o *natsserver.Options) {
		o.Nkeys = []*natsserver.NkeyUser{{Nkey: knownPub}}
	})
	credsURL := testsupport.StartNATSWith(t, op.serve)
	for _, tc := range []struct {
		name string
		cfg  NATSConfig
		ok   bool
	}{
		{"user and password", NATSConfig{URL: userURL, User: "alice", Password: "s3cret"}, true},
		{"in the URL", NATSConfig{URL: strings.Replace(userURL, "nats://", "nats://alice:s3cret@", 1)}, true},
		{"wrong password", NATSConfig{URL: userURL, User: "alice", Password: "guess"}, false},
		{"wrong user", NATSConfig{URL: userURL, User: "bob", Password: "s3cret"}, false},
		{"none given", NATSConfig{URL: userURL}, false},
		{"token", NATSConfig{URL: tokenURL, Token: "a-token"}, true},
		{"wrong token", NATSConfig{URL: tokenURL, Token: "b-token"}, false},
		{"nkey", NATSConfig{URL: nkeyURL, NKey: seedFile("known.nk", known)}, true},
		{"unknown nkey", NATSConfig{URL: nkeyURL, NKey: seedFile("stranger.nk", stranger)}, false},
		{"creds", NATSConfig{URL: credsURL, Creds: creds}, true},
		{"creds of another operator", NATSConfig{URL: credsURL, Creds: strangerCreds}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := connectNATS(tc.cfg, "n")
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				if err := nc.Publish("x", nil); err != nil {
					t.Fatal(err)
				}
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !strings.HasPrefix(err.Error(), "connect to NATS at ") || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Errorf("err %v: want connect to NATS at …: nats: authorization violation", err)
			}
		})
	}
}

// TestNATSConnTLS: a server certificate checked against --nats-ca, and a
// client certificate when the server asks for one.
func TestNATSConnTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "scalechat test CA")
	caFile := ca.writeCert(t, dir, "ca.pem")
	serverCert := ca.issue(t, "server", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, "node", x509.ExtKeyUsageClientAuth).write(t, dir, "client")
	otherCA := newTestCA(t, "another CA")
	otherCAFile := otherCA.writeCert(t, dir, "other-ca.pem")
	strangerCert, strangerKey := otherCA.issue(t, "stranger", x509.ExtKeyUsageClientAuth).write(t, dir, "stranger")

	tlsURL := testsupport.StartNATSWith(t, func(o *natsserver.Options) {
		o.TLS = true
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{serverCert.pair}, MinVersion: tls.VersionTLS12}
	})
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	mutualURL := testsupport.StartNATSWith(t, func(o *natsserver.Options) {
		o.TLS, o.TLSVerify = true, true
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{serverCert.pair}, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	})
	if !strings.HasPrefix(tlsURL, "tls://") {
		t.Fatalf("URL %s: want tls://", tlsURL)
	}
	plain := "nats://" + strings.TrimPrefix(tlsURL, "tls://")
	for _, tc := range []struct {
		name string
		cfg  NATSConfig
		want string // "" connects; else in the error
	}{
		{"CA", NATSConfig{URL: tlsURL, CA: caFile}, ""},
		{"CA, nats:// URL", NATSConfig{URL: plain, CA: caFile}, ""},
		{"no CA: the system's roots", NATSConfig{URL: tlsURL}, "certificate"},
		{"another CA", NATSConfig{URL: tlsURL, CA: otherCAFile}, "certificate"},
		{"client certificate", NATSConfig{URL: mutualURL, CA: caFile, Cert: clientCert, Key: clientKey}, ""},
		// TLS 1.3: the server's refusal of the client's certificate comes
		// after the handshake, as an alert or as the connection closed.
		{"no client certificate", NATSConfig{URL: mutualURL, CA: caFile}, "tls"},
		{"a stranger's client certificate", NATSConfig{URL: mutualURL, CA: caFile, Cert: strangerCert, Key: strangerKey}, "tls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := connectNATS(tc.cfg, "n")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				if !nc.TLSRequired() {
					t.Error("not TLS")
				}
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !strings.HasPrefix(err.Error(), "connect to NATS at ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v: want connect to NATS at … with %q", err, tc.want)
			}
		})
	}
}

// natsOperator is an operator and one account it signed: a server that
// trusts the operator takes the account's users' credentials files.
type natsOperator struct {
	account                      nkeys.KeyPair
	operatorPub, accountPub, jwt string // jwt: the account's, signed by the operator
}

func newNATSOperator(t *testing.T) *natsOperator {
	t.Helper()
	op, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	acc, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	o := &natsOperator{account: acc}
	o.operatorPub, _ = op.PublicKey()
	o.accountPub, _ = acc.PublicKey()
	if o.jwt, err = jwt.NewAccountClaims(o.accountPub).Encode(op); err != nil {
		t.Fatal(err)
	}
	return o
}

// serve sets a server's options to trust the operator and know its
// account (without JetStream, which the account's claims do not allow).
func (o *natsOperator) serve(opts *natsserver.Options) {
	opts.JetStream = false
	opts.TrustedKeys = []string{o.operatorPub}
	r := &natsserver.MemAccResolver{}
	_ = r.Store(o.accountPub, o.jwt)
	opts.AccountResolver = r
}

// creds returns a credentials file's contents for a new user of the
// account.
func (o *natsOperator) creds(t *testing.T) []byte {
	t.Helper()
	u, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := u.PublicKey()
	seed, _ := u.Seed()
	ujwt, err := jwt.NewUserClaims(pub).Encode(o.account)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

// testCert is a certificate the CA issued, and its key.
type testCert struct {
	pair    tls.Certificate
	certPEM []byte
	keyPEM  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, der: der}
}

func (ca *testCA) writeCert(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue makes a certificate for 127.0.0.1 and localhost.
func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCert{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	if c.pair, err = tls.X509KeyPair(c.certPEM, c.keyPEM); err != nil {
		t.Fatal(err)
	}
	return c
}

// write puts the certificate and its key in files, and returns their
// paths.
func (c *testCert) write(t *testing.T, dir, name string) (cert, key string) {
	t.Helper()
	cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(cert, c.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, c.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
