// Package auth verifies and mints the JSON Web Tokens that scalechat
// accepts: HS256 with a shared secret, or RS256/ES256 with a public key or a
// JWKS file. A token's "sub" is the user's name, its optional "rooms" the
// only rooms the connection may join, and "exp" when it stops being valid.
package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/scalechat/scalechat/internal/protocol"
)

// Claims are what a valid token says.
type Claims struct {
	Subject string
	Rooms   []string // nil: any room
	Expires time.Time
}

// MayJoin reports whether the token allows room.
func (c Claims) MayJoin(room string) bool { return c.Rooms == nil || slices.Contains(c.Rooms, room) }

type tokenClaims struct {
	jwt.RegisteredClaims
	Rooms []string `json:"rooms,omitempty"`
}

// ErrExpired is returned by Verify for a token past its "exp".
var ErrExpired = errors.New("token expired")

// Verifier checks tokens.
type Verifier struct {
	keyfunc jwt.Keyfunc
	methods []string
	now     func() time.Time
}

// NewHS256 returns a verifier of tokens signed with secret.
func NewHS256(secret []byte) (*Verifier, error) {
	if len(secret) < 16 {
		return nil, errors.New("the JWT secret must be at least 16 bytes")
	}
	return &Verifier{keyfunc: func(*jwt.Token) (any, error) { return secret, nil }, methods: []string{"HS256"}, now: time.Now}, nil
}

// NewPublicKey returns a verifier of RS256 or ES256 tokens signed by the
// private half of the PEM-encoded public key.
func NewPublicKey(pem []byte) (*Verifier, error) {
	if k, err := jwt.ParseRSAPublicKeyFromPEM(pem); err == nil {
		return &Verifier{keyfunc: func(*jwt.Token) (any, error) { return k, nil }, methods: []string{"RS256"}, now: time.Now}, nil
	}
	k, err := jwt.ParseECPublicKeyFromPEM(pem)
	if err != nil {
		return nil, errors.New("the public key is neither an RSA nor an ECDSA key in PEM")
	}
	if k.Curve != elliptic.P256() {
		return nil, errors.New("the ECDSA public key must be on P-256 (ES256)")
	}
	return &Verifier{keyfunc: func(*jwt.Token) (any, error) { return k, nil }, methods: []string{"ES256"}, now: time.Now}, nil
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// NewJWKS returns a verifier of RS256 and ES256 tokens signed by any key of
// a JSON Web Key Set; a token's "kid" header picks the key.
func NewJWKS(data []byte) (*Verifier, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("JWKS is not valid JSON: %w", err)
	}
	keys := map[string]crypto.PublicKey{}
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("JWKS key %d (kid %q): %w", i, k.Kid, err)
		}
		keys[k.Kid] = pub
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS holds no signing key")
	}
	return &Verifier{
		keyfunc: func(t *jwt.Token) (any, error) {
			kid, _ := t.Header["kid"].(string)
			k, ok := keys[kid]
			if !ok {
				return nil, fmt.Errorf("no key with kid %q", kid)
			}
			return k, nil
		},
		methods: []string{"RS256", "ES256"},
		now:     time.Now,
	}, nil
}

func b64(s string) (*big.Int, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(b), nil
}

func (k jwk) publicKey() (crypto.PublicKey, error) {
	switch k.Kty {
	case "RSA":
		n, err1 := b64(k.N)
		e, err2 := b64(k.E)
		if err1 != nil || err2 != nil || n.Sign() == 0 || !e.IsInt64() {
			return nil, errors.New("bad RSA modulus or exponent")
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		if k.Crv != "P-256" {
			return nil, fmt.Errorf("curve %q is not P-256", k.Crv)
		}
		x, err1 := b64(k.X)
		y, err2 := b64(k.Y)
		if err1 != nil || err2 != nil {
			return nil, errors.New("bad EC coordinates")
		}
		var point [65]byte
		point[0] = 4 // uncompressed
		if x.BitLen() > 256 || y.BitLen() > 256 {
			return nil, errors.New("EC point is not on P-256")
		}
		x.FillBytes(point[1:33])
		y.FillBytes(point[33:])
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point[:])
		if err != nil {
			return nil, errors.New("EC point is not on P-256")
		}
		return pub, nil
	}
	return nil, fmt.Errorf("key type %q is not RSA or EC", k.Kty)
}

// Verify checks token's signature and expiry and returns its claims. The
// error is one short sentence fit for an HTTP answer.
func (v *Verifier) Verify(token string) (Claims, error) {
	var tc tokenClaims
	_, err := jwt.ParseWithClaims(token, &tc, v.keyfunc,
		jwt.WithValidMethods(v.methods), jwt.WithExpirationRequired(), jwt.WithTimeFunc(v.now))
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Claims{}, ErrExpired
	case err != nil:
		return Claims{}, errors.New("invalid token")
	case tc.Subject == "":
		return Claims{}, errors.New("token has no sub")
	case !protocol.ValidUser(tc.Subject):
		return Claims{}, errors.New("the token's sub is not a valid user name: " + protocol.UserRule)
	}
	return Claims{Subject: tc.Subject, Rooms: tc.Rooms, Expires: tc.ExpiresAt.Time}, nil
}

// MintHS256 returns a token for sub, valid for ttl, limited to rooms when
// rooms is not nil, signed with secret.
func MintHS256(secret []byte, sub string, rooms []string, ttl time.Duration) (string, error) {
	now := time.Now()
	tc := tokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: sub, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl))},
		Rooms:            rooms,
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, tc).SignedString(secret)
}
