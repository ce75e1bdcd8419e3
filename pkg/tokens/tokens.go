// Package tokens generates, parses and hashes CodeLotse personal access
// tokens (clt_ followed by 32 random bytes in unpadded base64url) and holds
// the rules for their names and lifetimes.
//
// It performs no I/O: storage lives in pkg/postgres. The secret exists only
// in the value returned by Generate; everything stored is derived from it
// with Hash and Last4.
package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/shape"
)

const (
	// Prefix starts every token, so that scanners (gitleaks, our redactor)
	// can recognise one wherever it is pasted.
	Prefix = "clt_"
	// secretBytes is the entropy of a token.
	secretBytes = 32
	// encodedLen is the length of the base64url encoding of secretBytes.
	encodedLen = 43
	// Len is the full length of a token.
	Len = len(Prefix) + encodedLen

	MinExpiryDays     = 1
	MaxExpiryDays     = 90
	DefaultExpiryDays = 30
	// MaxActive is how many active (not revoked, not expired) tokens one
	// person may hold in one tenant.
	MaxActive   = 10
	MaxNameRune = 100
)

// Generate returns a fresh token from crypto/rand.
func Generate() string {
	var b [secretBytes]byte
	// crypto/rand.Read never returns an error on supported platforms (Go 1.24+
	// crashes the program instead), so there is nothing to handle.
	_, _ = rand.Read(b[:])
	return Prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Valid reports whether s has the exact shape of a token: the prefix and 43
// base64url characters that decode to 32 bytes. It does not say whether the
// token exists.
func Valid(s string) bool {
	if len(s) != Len || !strings.HasPrefix(s, Prefix) {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s[len(Prefix):])
	return err == nil && len(b) == secretBytes
}

// Hash is the SHA-256 of the whole token, the only form that is stored.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Last4 is the token's last four characters, stored for display (clt_…abcd).
func Last4(token string) string {
	if len(token) < 4 {
		return token
	}
	return token[len(token)-4:]
}

// CheckName validates a token name: 1–100 characters after trimming spaces
// and dropping invisible and bidirectional-control characters
// (shape.Sanitize): the name is shown on the access page and in audits,
// where a zero-width name or a right-to-left override would mislead.
func CheckName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if !utf8.ValidString(name) {
		return "", codelotse.Errorf(codelotse.Invalid, "token name must be valid UTF-8")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return "", codelotse.Errorf(codelotse.Invalid, "token name must not contain control characters")
		}
	}
	name = strings.TrimSpace(shape.Sanitize(name))
	n := utf8.RuneCountInString(name)
	if n < 1 || n > MaxNameRune {
		return "", codelotse.Errorf(codelotse.Invalid, "token name must be 1 to %d characters", MaxNameRune)
	}
	return name, nil
}

// ExpiresAt validates a lifetime in days (0 means the default) and returns the
// expiry measured from now.
func ExpiresAt(now time.Time, days int) (time.Time, error) {
	if days == 0 {
		days = DefaultExpiryDays
	}
	if days < MinExpiryDays || days > MaxExpiryDays {
		return time.Time{}, codelotse.Errorf(codelotse.Invalid, "expiry must be %d to %d days, not %d", MinExpiryDays, MaxExpiryDays, days)
	}
	return now.Add(time.Duration(days) * 24 * time.Hour), nil
}
