package auth

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Grant is what a minted token says.
type Grant struct {
	// Subject is the sub claim: a service's name or an agent's DID.
	Subject string
	// Scopes is the scope claim.
	Scopes Scopes
	// TTL is the token's lifetime, from IssuedAt; it must be positive.
	TTL time.Duration
	// Issuer and Audience, when set, become iss and aud.
	Issuer, Audience string
	// IssuedAt is iat and nbf; zero means now.
	IssuedAt time.Time
}

// Mint signs a token for g: HS256 with secret, or, when key is set,
// EdDSA (Ed25519) or RS256. It is how an operator makes tokens
// (chronos token) and how tests do.
func Mint(g Grant, secret []byte, key crypto.Signer) (string, error) {
	switch {
	case g.Subject == "":
		return "", errors.New("sub: is required")
	case g.TTL <= 0:
		return "", fmt.Errorf("ttl: must be positive, got %s", g.TTL)
	}
	iat := g.IssuedAt
	if iat.IsZero() {
		iat = time.Now()
	}
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   g.Subject,
			Issuer:    g.Issuer,
			IssuedAt:  jwt.NewNumericDate(iat),
			NotBefore: jwt.NewNumericDate(iat),
			ExpiresAt: jwt.NewNumericDate(iat.Add(g.TTL)),
		},
		Scope: scopeClaim(g.Scopes),
	}
	if g.Audience != "" {
		c.Audience = jwt.ClaimStrings{g.Audience}
	}
	switch k := key.(type) {
	case nil:
		if len(secret) < MinSecretBytes {
			return "", fmt.Errorf("AUTH_JWT_SECRET must be at least %d bytes, got %d", MinSecretBytes, len(secret))
		}
		return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
	case ed25519.PrivateKey:
		return jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(k)
	case *rsa.PrivateKey:
		return jwt.NewWithClaims(jwt.SigningMethodRS256, c).SignedString(k)
	}
	return "", fmt.Errorf("auth: cannot sign with a %T", key)
}
