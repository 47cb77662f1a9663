package auth

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// didPrefix starts every agent DID.
const didPrefix = "did:matrix:"

// DID is an agent's decentralized identifier, did:matrix:<user_id>:<keyfp>:
// the owner of its alarms.
type DID struct {
	// Raw is the whole DID, the owner key of alarms.
	Raw string
	// UserID is the user the agent acts for: the wake target.
	UserID string
	// KeyFingerprint is the fingerprint of the agent's key.
	KeyFingerprint string
}

// String returns the DID as written.
func (d DID) String() string { return d.Raw }

// ErrMalformedDID is wrapped by ParseDID's errors.
var ErrMalformedDID = errors.New("malformed DID")

// ParseDID parses did:matrix:<user_id>:<keyfp>. The key fingerprint is
// the part after the last colon, so a user_id may itself hold colons;
// neither part may be empty or hold spaces or control characters.
func ParseDID(s string) (DID, error) {
	bad := func(why string) (DID, error) {
		return DID{}, fmt.Errorf("%w %q: %s (want did:matrix:<user_id>:<keyfp>)", ErrMalformedDID, s, why)
	}
	rest, ok := strings.CutPrefix(s, didPrefix)
	if !ok {
		return bad("does not start with " + didPrefix)
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return bad("no key fingerprint")
	}
	user, fp := rest[:i], rest[i+1:]
	switch {
	case user == "":
		return bad("empty user_id")
	case fp == "":
		return bad("empty key fingerprint")
	case strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar
	}) >= 0:
		return bad("holds a space, control or format character")
	}
	return DID{Raw: s, UserID: user, KeyFingerprint: fp}, nil
}
