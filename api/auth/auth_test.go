package auth_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api/auth"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef")
	now    = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
)

func clock() time.Time { return now }

func mint(t *testing.T, g auth.Grant, secret []byte) string {
	t.Helper()
	if g.IssuedAt.IsZero() {
		g.IssuedAt = now
	}
	tok, err := auth.Mint(g, secret, nil)
	require.NoError(t, err)
	return tok
}

func TestVerifyHS256(t *testing.T) {
	t.Parallel()
	v, err := auth.NewVerifier(auth.Config{Secret: secret, Now: clock})
	require.NoError(t, err)

	id, err := v.Verify(mint(t, auth.Grant{Subject: "deployer", Scopes: auth.Scopes{auth.ScopeSchedulesWrite}, TTL: time.Hour}, secret))
	require.NoError(t, err)
	require.Equal(t, "deployer", id.Subject)
	require.True(t, id.Scopes.Has(auth.ScopeSchedulesWrite))
	require.False(t, id.Scopes.Has(auth.ScopeSchedulesRead))
	require.Equal(t, now.Add(time.Hour), id.ExpiresAt.UTC())

	cases := map[string]struct {
		token  string
		reason string
	}{
		"expired": {mint(t, auth.Grant{Subject: "a", TTL: time.Minute, IssuedAt: now.Add(-2 * time.Hour)}, secret), "token is expired"},
		"foreign": {mint(t, auth.Grant{Subject: "a", TTL: time.Hour}, []byte(strings.Repeat("x", 32))), "token signature is invalid"},
		"garbage": {"not.a.token", "token is malformed"},
		"empty":   {"", "token is malformed"},
		"no exp":  {unsigned(t, `{"alg":"HS256","typ":"JWT"}`, `{"sub":"a"}`, secret), "token has no expiry (exp)"},
		"no sub":  {unsigned(t, `{"alg":"HS256","typ":"JWT"}`, `{"exp":1893456000}`, secret), "token has no subject (sub)"},
		"alg none": {base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
			base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"a","exp":1893456000,"scope":"admin"}`)) + ".", "token signature is invalid"},
		"future": {mint(t, auth.Grant{Subject: "a", TTL: time.Hour, IssuedAt: now.Add(time.Hour)}, secret), "token is not valid yet"},
	}
	for name, tc := range cases {
		_, err := v.Verify(tc.token)
		require.Error(t, err, name)
		var ae *auth.Error
		require.ErrorAs(t, err, &ae, name)
		require.Contains(t, ae.Reason, tc.reason, name)
	}
}

// unsigned builds an HS256 token from raw header and payload JSON, to
// craft claims Mint refuses to make.
func unsigned(t *testing.T, header, payload string, key []byte) string {
	t.Helper()
	tok, err := hs256(base64.RawURLEncoding.EncodeToString([]byte(header))+"."+base64.RawURLEncoding.EncodeToString([]byte(payload)), key)
	require.NoError(t, err)
	return tok
}

func TestVerifyIssuerAudience(t *testing.T) {
	t.Parallel()
	v, err := auth.NewVerifier(auth.Config{Secret: secret, Issuer: "ops", Audience: "chronos", Now: clock})
	require.NoError(t, err)
	_, err = v.Verify(mint(t, auth.Grant{Subject: "a", TTL: time.Hour, Issuer: "ops", Audience: "chronos"}, secret))
	require.NoError(t, err)
	_, err = v.Verify(mint(t, auth.Grant{Subject: "a", TTL: time.Hour, Issuer: "evil", Audience: "chronos"}, secret))
	require.ErrorContains(t, err, "issuer")
	_, err = v.Verify(mint(t, auth.Grant{Subject: "a", TTL: time.Hour, Issuer: "ops", Audience: "other"}, secret))
	require.ErrorContains(t, err, "audience")
	_, err = v.Verify(mint(t, auth.Grant{Subject: "a", TTL: time.Hour}, secret))
	require.Error(t, err)
}

func TestVerifyAsymmetric(t *testing.T) {
	t.Parallel()
	edPub, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	otherEdPub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		pub, wrongPub any
		key           any
	}{
		"ed25519": {edPub, otherEdPub, edKey},
		"rsa":     {&rsaKey.PublicKey, otherEdPub, rsaKey},
	} {
		der, err := x509.MarshalPKIXPublicKey(tc.pub)
		require.NoError(t, err)
		pemText := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
		// The setting takes PEM text or a path.
		path := filepath.Join(t.TempDir(), "pub.pem")
		require.NoError(t, os.WriteFile(path, []byte(pemText), 0o600))
		for _, value := range []string{pemText, path} {
			pub, err := auth.ParsePublicKey("AUTH_JWT_PUBLIC_KEY", value)
			require.NoError(t, err, name)
			v, err := auth.NewVerifier(auth.Config{PublicKey: pub, Now: clock})
			require.NoError(t, err, name)

			privDER, err := x509.MarshalPKCS8PrivateKey(tc.key)
			require.NoError(t, err)
			signer, err := auth.ParsePrivateKey("key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})))
			require.NoError(t, err)
			tok, err := auth.Mint(auth.Grant{Subject: "svc", Scopes: auth.Scopes{auth.ScopeAdmin}, TTL: time.Hour, IssuedAt: now}, nil, signer)
			require.NoError(t, err)
			id, err := v.Verify(tok)
			require.NoError(t, err, name)
			require.True(t, id.Scopes.Has(auth.ScopeRunsWrite), "admin implies every scope")

			// An HS256 token keyed with the public key's bytes (the
			// algorithm confusion attack) and a token of another key fail.
			hs, err := hs256(strings.Join(strings.Split(mint(t, auth.Grant{Subject: "a", TTL: time.Hour}, secret), ".")[:2], "."), der)
			require.NoError(t, err)
			_, err = v.Verify(hs)
			require.ErrorContains(t, err, "signature is invalid", name)
		}
		wv, err := auth.NewVerifier(auth.Config{PublicKey: tc.wrongPub, Now: clock})
		require.NoError(t, err)
		privDER, err := x509.MarshalPKCS8PrivateKey(tc.key)
		require.NoError(t, err)
		signer, err := auth.ParsePrivateKey("key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})))
		require.NoError(t, err)
		tok, err := auth.Mint(auth.Grant{Subject: "svc", TTL: time.Hour, IssuedAt: now}, nil, signer)
		require.NoError(t, err)
		_, err = wv.Verify(tok)
		require.ErrorContains(t, err, "signature is invalid", name)
	}
}

func TestNewVerifierRefuses(t *testing.T) {
	t.Parallel()
	_, err := auth.NewVerifier(auth.Config{})
	require.ErrorContains(t, err, "AUTH_JWT_SECRET")
	_, err = auth.NewVerifier(auth.Config{Secret: []byte("short")})
	require.ErrorContains(t, err, "at least 32 bytes")
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	_, err = auth.NewVerifier(auth.Config{Secret: secret, PublicKey: pub})
	require.ErrorContains(t, err, "not both")
	_, err = auth.ParsePublicKey("AUTH_JWT_PUBLIC_KEY", "/nonexistent/key.pem")
	require.ErrorContains(t, err, "AUTH_JWT_PUBLIC_KEY: neither a PEM block nor a readable file")
	_, err = auth.ParsePublicKey("AUTH_JWT_PUBLIC_KEY", "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n")
	require.ErrorContains(t, err, "AUTH_JWT_PUBLIC_KEY")
}

func TestScopeClaim(t *testing.T) {
	t.Parallel()
	v, err := auth.NewVerifier(auth.Config{Secret: secret, Now: clock})
	require.NoError(t, err)
	for payload, want := range map[string]auth.Scopes{
		`{"sub":"a","exp":1893456000,"scope":"schedules:read  runs:write"}`: {auth.ScopeSchedulesRead, auth.ScopeRunsWrite},
		`{"sub":"a","exp":1893456000,"scope":["schedules:write","bogus"]}`:  {auth.ScopeSchedulesWrite, "bogus"},
		`{"sub":"a","exp":1893456000}`:                                      nil,
	} {
		id, err := v.Verify(unsigned(t, `{"alg":"HS256","typ":"JWT"}`, payload, secret))
		require.NoError(t, err, payload)
		require.Equal(t, want, id.Scopes, payload)
	}
	_, err = v.Verify(unsigned(t, `{"alg":"HS256","typ":"JWT"}`, `{"sub":"a","exp":1893456000,"scope":7}`, secret))
	require.Error(t, err)

	ss, err := auth.ParseScopes("schedules:read,admin schedules:read")
	require.NoError(t, err)
	require.Equal(t, auth.Scopes{auth.ScopeSchedulesRead, auth.ScopeAdmin}, ss)
	_, err = auth.ParseScopes("schedules:reed")
	require.ErrorContains(t, err, `unknown scope "schedules:reed"`)
	_, err = auth.ParseScopes(" ")
	require.ErrorContains(t, err, "scope: is required")
}

func TestParseDID(t *testing.T) {
	t.Parallel()
	d, err := auth.ParseDID("did:matrix:6f1c2a4e-0b7d-4c1e-9a55-2f3e4d5c6b7a:ab12cd34")
	require.NoError(t, err)
	require.Equal(t, "6f1c2a4e-0b7d-4c1e-9a55-2f3e4d5c6b7a", d.UserID)
	require.Equal(t, "ab12cd34", d.KeyFingerprint)
	require.Equal(t, "did:matrix:6f1c2a4e-0b7d-4c1e-9a55-2f3e4d5c6b7a:ab12cd34", d.String())

	d, err = auth.ParseDID("did:matrix:@alice:example.org:fp")
	require.NoError(t, err)
	require.Equal(t, "@alice:example.org", d.UserID)

	for in, why := range map[string]string{
		"deployer":                 "does not start with did:matrix:",
		"did:web:example.com:x":    "does not start with did:matrix:",
		"did:matrix:user":          "no key fingerprint",
		"did:matrix::fp":           "empty user_id",
		"did:matrix:user:":         "empty key fingerprint",
		"did:matrix:us er:fp":      "space",
		"did:matrix:user\x00:fp":   "control",
		"did:matrix:us\u200ber:fp": "format",
	} {
		_, err := auth.ParseDID(in)
		require.ErrorIs(t, err, auth.ErrMalformedDID, in)
		require.ErrorContains(t, err, why, in)
		require.ErrorContains(t, err, "want did:matrix:<user_id>:<keyfp>", in)
	}

	id := auth.Identity{Subject: "did:matrix:u1:fp"}
	owner, err := id.Owner()
	require.NoError(t, err)
	require.Equal(t, "u1", owner.UserID)
	_, err = auth.Identity{Subject: "deployer"}.Owner()
	require.ErrorIs(t, err, auth.ErrMalformedDID)
}

func TestMintRefuses(t *testing.T) {
	t.Parallel()
	_, err := auth.Mint(auth.Grant{TTL: time.Hour}, secret, nil)
	require.ErrorContains(t, err, "sub: is required")
	_, err = auth.Mint(auth.Grant{Subject: "a"}, secret, nil)
	require.ErrorContains(t, err, "ttl: must be positive")
	_, err = auth.Mint(auth.Grant{Subject: "a", TTL: time.Hour}, []byte("short"), nil)
	require.ErrorContains(t, err, "at least 32 bytes")
}
