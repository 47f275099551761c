package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	der, _ = x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r1", "n": enc(rsaKey.N.Bytes()), "e": enc([]byte{1, 0, 1})},
		{"kty": "EC", "kid": "e1", "crv": "P-256", "x": enc(ecKey.X.FillBytes(make([]byte, 32))), "y": enc(ecKey.Y.FillBytes(make([]byte, 32)))},
	}})

	hs, _ := NewHS256(secret)
	rs, err := NewPublicKey(rsaPEM)
	if err != nil {
		t.Fatal(err)
	}
	es, err := NewPublicKey(ecPEM)
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewJWKS(jwks)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	ok := jwt.MapClaims{"sub": "alice", "exp": exp, "rooms": []string{"a", "b"}}
	tests := []struct {
		name  string
		v     *Verifier
		token string
		want  error // nil: valid
	}{
		{"HS256", hs, sign(t, jwt.SigningMethodHS256, secret, "", ok), nil},
		{"forged HS256", hs, sign(t, jwt.SigningMethodHS256, []byte("another secret, 32 bytes long..."), "", ok), errInvalid},
		{"expired", hs, sign(t, jwt.SigningMethodHS256, secret, "", jwt.MapClaims{"sub": "a", "exp": time.Now().Add(-time.Minute).Unix()}), ErrExpired},
		{"no exp", hs, sign(t, jwt.SigningMethodHS256, secret, "", jwt.MapClaims{"sub": "a"}), errInvalid},
		{"no sub", hs, sign(t, jwt.SigningMethodHS256, secret, "", jwt.MapClaims{"exp": exp}), errInvalid},
		{"sub of 100 bytes", hs, sign(t, jwt.SigningMethodHS256, secret, "", jwt.MapClaims{"sub": strings.Repeat("a", 100), "exp": exp}), errInvalid},
		{"sub with control characters", hs, sign(t, jwt.SigningMethodHS256, secret, "", jwt.MapClaims{"sub": "\u0007\n", "exp": exp}), errInvalid},
		{"sub with a bidi override", hs, sign(t, jwt.SigningMethodHS256, secret, "", jwt.MapClaims{"sub": "\u202eann", "exp": exp}), errInvalid},
		{"alg none", hs, sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", ok), errInvalid},
		{"RS256 token to an HS256 server", hs, sign(t, jwt.SigningMethodRS256, rsaKey, "", ok), errInvalid},
		{"garbage", hs, "not.a.token", errInvalid},
		{"RS256 PEM", rs, sign(t, jwt.SigningMethodRS256, rsaKey, "", ok), nil},
		{"ES256 PEM", es, sign(t, jwt.SigningMethodES256, ecKey, "", ok), nil},
		{"HS256 signed with the public key", rs, sign(t, jwt.SigningMethodHS256, rsaPEM, "", ok), errInvalid},
		{"JWKS RSA", set, sign(t, jwt.SigningMethodRS256, rsaKey, "r1", ok), nil},
		{"JWKS EC", set, sign(t, jwt.SigningMethodES256, ecKey, "e1", ok), nil},
		{"JWKS unknown kid", set, sign(t, jwt.SigningMethodES256, ecKey, "zz", ok), errInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.v.Verify(tt.token)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == ErrExpired && !errors.Is(err, ErrExpired):
				t.Fatalf("got %v, want expired", err)
			case tt.want == errInvalid && err == nil:
				t.Fatalf("accepted %+v", c)
			case tt.want == nil && (c.Subject != "alice" || !c.MayJoin("a") || c.MayJoin("c") || c.Expires.Unix() != exp):
				t.Errorf("claims %+v", c)
			}
		})
	}
}

var errInvalid = errors.New("any refusal but expiry")

func TestMintAndNoRoomsClaim(t *testing.T) {
	tok, err := MintHS256(secret, "bob", nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NewHS256(secret)
	c, err := v.Verify(tok)
	if err != nil || c.Subject != "bob" || !c.MayJoin("anything") {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := NewHS256([]byte("short")); err == nil {
		t.Error("a 5-byte secret was accepted")
	}
	if _, err := NewJWKS([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AQ","y":"AQ"}]}`)); err == nil {
		t.Error("a point off the curve was accepted")
	}
}
