package auth

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	// MinSecretBytes is the shortest HS256 secret accepted: 256 bits, the
	// size of the hash (RFC 7518 §3.2).
	MinSecretBytes = 32
	// LeewayDefault is the clock skew allowed on exp, nbf and iat.
	LeewayDefault = 30 * time.Second
)

// Config says how tokens are verified: exactly one of Secret and
// PublicKey.
type Config struct {
	// Secret verifies HS256 tokens (AUTH_JWT_SECRET), at least
	// MinSecretBytes long.
	Secret []byte
	// PublicKey verifies EdDSA (an ed25519.PublicKey) or RS256 (an
	// *rsa.PublicKey) tokens (AUTH_JWT_PUBLIC_KEY; see ParsePublicKey).
	PublicKey crypto.PublicKey
	// Issuer, when set, must equal the token's iss (AUTH_JWT_ISSUER).
	Issuer string
	// Audience, when set, must be one of the token's aud
	// (AUTH_JWT_AUDIENCE).
	Audience string
	// Leeway is the clock skew allowed. Default LeewayDefault (30s).
	Leeway time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Verifier checks tokens. It is safe for concurrent use.
type Verifier struct {
	parser *jwt.Parser
	key    any
}

// claims are the claims chronos reads.
type claims struct {
	jwt.RegisteredClaims
	Scope scopeClaim `json:"scope,omitempty"`
}

// NewVerifier checks cfg and returns its verifier.
func NewVerifier(cfg Config) (*Verifier, error) {
	if cfg.PublicKey != nil && len(cfg.Secret) > 0 {
		return nil, errors.New("auth: set one of AUTH_JWT_SECRET and AUTH_JWT_PUBLIC_KEY, not both")
	}
	var (
		key    any
		method string
	)
	switch k := cfg.PublicKey.(type) {
	case nil:
		if len(cfg.Secret) == 0 {
			return nil, errors.New("auth: set AUTH_JWT_SECRET (HS256) or AUTH_JWT_PUBLIC_KEY (Ed25519 or RSA)")
		}
		if len(cfg.Secret) < MinSecretBytes {
			return nil, fmt.Errorf("AUTH_JWT_SECRET must be at least %d bytes, got %d (e.g. openssl rand -hex 32)", MinSecretBytes, len(cfg.Secret))
		}
		key, method = cfg.Secret, jwt.SigningMethodHS256.Alg()
	case ed25519.PublicKey:
		key, method = k, jwt.SigningMethodEdDSA.Alg()
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("AUTH_JWT_PUBLIC_KEY: an RSA key needs at least 2048 bits, got %d", k.N.BitLen())
		}
		key, method = k, jwt.SigningMethodRS256.Alg()
	default:
		return nil, fmt.Errorf("AUTH_JWT_PUBLIC_KEY: want an Ed25519 or RSA public key, got %T", k)
	}
	leeway := cfg.Leeway
	if leeway == 0 {
		leeway = LeewayDefault
	}
	opts := []jwt.ParserOption{
		// Only the configured algorithm: a token that names another
		// (none, or HS256 keyed with the public key) is refused.
		jwt.WithValidMethods([]string{method}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithIssuedAt(),
	}
	if cfg.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(cfg.Now))
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	return &Verifier{parser: jwt.NewParser(opts...), key: key}, nil
}

// Error is why a token was refused; its message is safe to show the
// caller.
type Error struct {
	// Reason says what is wrong, for the caller.
	Reason string
	cause  error
}

func (e *Error) Error() string { return e.Reason }
func (e *Error) Unwrap() error { return e.cause }

// Verify checks a compact JWS token and returns its caller's identity.
// Every failure is an *Error.
func (v *Verifier) Verify(token string) (Identity, error) {
	var c claims
	_, err := v.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return v.key, nil })
	if err != nil {
		return Identity{}, &Error{Reason: reason(err), cause: err}
	}
	if c.Subject == "" {
		return Identity{}, &Error{Reason: "token has no subject (sub)"}
	}
	return Identity{Subject: c.Subject, Scopes: Scopes(c.Scope), ExpiresAt: c.ExpiresAt.Time}, nil
}

// reason words a jwt error for the caller, without echoing the token.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "token is malformed"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "token signature is invalid (signed by another key or algorithm)"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "token has no expiry (exp)"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token is expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "token is not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "token issuer (iss) is not accepted"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "token audience (aud) is not accepted"
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		return "token claims are invalid"
	}
	return "token is invalid: " + strings.SplitN(err.Error(), ":", 2)[0]
}
