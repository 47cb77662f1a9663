package auth_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// hs256 signs signingInput (header.payload) with HMAC-SHA256 by hand.
func hs256(signingInput string, key []byte) (string, error) {
	m := hmac.New(sha256.New, key)
	_, err := m.Write([]byte(signingInput))
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), err
}
