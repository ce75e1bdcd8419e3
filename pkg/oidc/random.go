package oidc

import (
	"crypto/rand"
	"encoding/base64"
)

// randomBytes is the entropy of every value below: 256 bits, so a value can
// be neither guessed nor collided with another sign-in's.
const randomBytes = 32

// NewState returns a fresh value for the state parameter, which ties the
// provider's redirect back to the browser session that started the sign-in
// (CSRF protection for the callback).
func NewState() string { return randomString() }

// NewNonce returns a fresh nonce, which ties the ID token to this sign-in so
// that a token issued for another one cannot be replayed.
func NewNonce() string { return randomString() }

// NewVerifier returns a fresh PKCE code verifier: 43 characters of the
// base64url alphabet, inside RFC 7636's 43–128 unreserved characters. It
// ensures an intercepted code is useless without the session that began the
// sign-in.
func NewVerifier() string { return randomString() }

func randomString() string {
	b := make([]byte, randomBytes)
	// crypto/rand.Read never fails since Go 1.24 (it crashes the program
	// instead of returning predictable bytes), so there is no error to pass on.
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
