package auth

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
)

// readPEM returns value when it holds a PEM block, or else the contents
// of the file it names.
func readPEM(name, value string) ([]byte, error) {
	if strings.Contains(value, "-----BEGIN") {
		return []byte(value), nil
	}
	b, err := os.ReadFile(value)
	if err != nil {
		return nil, fmt.Errorf("%s: neither a PEM block nor a readable file: %w", name, err)
	}
	return b, nil
}

// ParsePublicKey reads an Ed25519 or RSA public key (PKIX "PUBLIC KEY",
// or an "RSA PUBLIC KEY", or a certificate) from PEM text or from the
// file that value names. name labels errors (the setting).
func ParsePublicKey(name, value string) (crypto.PublicKey, error) {
	b, err := readPEM(name, value)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block found", name)
	}
	var key any
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	default:
		return nil, fmt.Errorf("%s: PEM block %q is not a public key (want PUBLIC KEY)", name, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch k := key.(type) {
	case ed25519.PublicKey, *rsa.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("%s: want an Ed25519 or RSA public key, got %T", name, key)
}

// ParsePrivateKey reads an Ed25519 or RSA private key (PKCS #8 "PRIVATE
// KEY", or "RSA PRIVATE KEY") from PEM text or the file value names.
func ParsePrivateKey(name, value string) (crypto.Signer, error) {
	b, err := readPEM(name, value)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block found", name)
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%s: PEM block %q is not a private key (want PRIVATE KEY)", name, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch k := key.(type) {
	case ed25519.PrivateKey, *rsa.PrivateKey:
		return k.(crypto.Signer), nil
	}
	return nil, fmt.Errorf("%s: want an Ed25519 or RSA private key, got %T", name, key)
}
