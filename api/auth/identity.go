package auth

import (
	"context"
	"time"
)

// Identity is the verified caller of a request.
type Identity struct {
	// Subject is the token's sub: a service's name or an agent's DID.
	Subject string
	// Scopes are what the token grants.
	Scopes Scopes
	// ExpiresAt is the token's expiry.
	ExpiresAt time.Time
}

// Owner parses the subject as an agent's DID: the owner of alarms. A
// subject that is not a well-formed DID is an error wrapping
// ErrMalformedDID, which owner-scoped routes answer with 401.
func (id Identity) Owner() (DID, error) { return ParseDID(id.Subject) }

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity the API verified for this request;
// ok is false when the request carried none (the API runs open).
func FromContext(ctx context.Context) (id Identity, ok bool) {
	id, ok = ctx.Value(identityKey{}).(Identity)
	return id, ok
}
