// Package oauth holds the pure rules of CodeLotse's OAuth 2.1 authorization
// server for its own MCP endpoints (MCP authorization, revision 2026-07-28):
// PKCE S256, redirect-URI matching (RFC 8252 loopback any-port), Client ID
// Metadata Document validation, the formats of authorization codes and
// refresh tokens, lifetimes, and the RFC 6749 error codes.
//
// It performs no I/O: fetching documents is the caller's (through
// pkg/safehttp), storage is pkg/postgres's, and the HTTP edge is
// pkg/httpserver's. Nothing here ever logs a code, verifier or token.
package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
	"time"
)

// Lifetimes (docs/decisions.md, "Issue 12: OAuth").
const (
	// AccessTTL is the life of an access token: an ordinary clt_ token that
	// the client refreshes, so that a revoked grant or a switched-off tenant
	// stops a client within the hour even where a check were ever missed.
	AccessTTL = time.Hour
	// CodeTTL is the life of an authorization code: the client exchanges it
	// at once; anything older is stale or stolen.
	CodeTTL = 2 * time.Minute
	// GrantTTL bounds a grant (and every refresh token of it), like the
	// longest personal access token.
	GrantTTL = 90 * 24 * time.Hour
	// ClientUnusedTTL is how long a dynamically registered client lives
	// without being used; each use extends it.
	ClientUnusedTTL = 30 * 24 * time.Hour
	// MetadataUnusedTTL is how long the stored copy of a client's metadata
	// document is kept while no grant or code refers to it: the longest a
	// document may be cached (CacheFor), so a copy older than that would
	// be fetched again before its next use anyway.
	MetadataUnusedTTL = 24 * time.Hour
	// RequestTTL bounds the authorization request a person is asked to
	// consent to (the consent form is signed with it in the session).
	RequestTTL = 10 * time.Minute
)

// Scope is the only scope there is: read-only MCP access.
const Scope = "mcp:read"

// Secret prefixes. They differ from clt_ (the access token, a personal
// access token) so that a leaked refresh token or code is recognisable by
// scanners and is never accepted as a bearer token.
const (
	RefreshPrefix = "clr_"
	CodePrefix    = "clc_"
	// ClientPrefix starts the client_id of a dynamically registered client
	// (not a secret: public clients only).
	ClientPrefix = "cld_"
)

// RFC 6749 §5.2 / §4.1.2.1 error codes, plus RFC 8707's invalid_target.
const (
	ErrInvalidRequest          = "invalid_request"
	ErrInvalidClient           = "invalid_client"
	ErrInvalidGrant            = "invalid_grant"
	ErrUnauthorizedClient      = "unauthorized_client"
	ErrUnsupportedGrantType    = "unsupported_grant_type"
	ErrUnsupportedResponseType = "unsupported_response_type"
	ErrInvalidScope            = "invalid_scope"
	ErrAccessDenied            = "access_denied"
	ErrInvalidTarget           = "invalid_target"
	ErrServerError             = "server_error"
	ErrTemporarilyUnavailable  = "temporarily_unavailable"
	ErrInvalidRedirectURI      = "invalid_redirect_uri"
	ErrInvalidClientMetadata   = "invalid_client_metadata"
)

// Error is an OAuth error: a code from the list above and a description
// written for the client's developer (never a secret).
type Error struct {
	Code        string
	Description string
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// Errorf is a shorthand for an *Error.
func Errorf(code, description string) *Error { return &Error{Code: code, Description: description} }

const secretBytes = 32

func newSecret(prefix string) string {
	var b [secretBytes]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms (Go 1.24+)
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// NewRefreshToken returns a fresh refresh token (clr_ + 43 characters).
func NewRefreshToken() string { return newSecret(RefreshPrefix) }

// NewCode returns a fresh authorization code (clc_ + 43 characters).
func NewCode() string { return newSecret(CodePrefix) }

// NewClientID returns a client_id for a dynamically registered client.
func NewClientID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return ClientPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func validSecret(s, prefix string) bool {
	if len(s) != len(prefix)+43 || !strings.HasPrefix(s, prefix) {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s[len(prefix):])
	return err == nil && len(b) == secretBytes
}

// ValidRefreshToken reports whether s has the shape of a refresh token.
func ValidRefreshToken(s string) bool { return validSecret(s, RefreshPrefix) }

// ValidCode reports whether s has the shape of an authorization code.
func ValidCode(s string) bool { return validSecret(s, CodePrefix) }

// Hash is the stored form of a code or refresh token.
func Hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// ValidVerifier reports whether v is a PKCE code verifier (RFC 7636 §4.1:
// 43 to 128 unreserved characters).
func ValidVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for _, r := range v {
		if !unreserved(r) {
			return false
		}
	}
	return true
}

// ValidChallenge reports whether c is an S256 code challenge: the unpadded
// base64url of a SHA-256 (43 characters).
func ValidChallenge(c string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	return err == nil && len(b) == sha256.Size
}

// VerifyPKCE checks a verifier against an S256 challenge in constant time.
// There is no plain method: a challenge is always S256.
func VerifyPKCE(verifier, challenge string) bool {
	if !ValidVerifier(verifier) || !ValidChallenge(challenge) {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

func unreserved(r rune) bool {
	return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' || r == '~'
}

// ParseScope checks a requested scope: empty (the default) or a list that
// contains only mcp:read (offline_access is tolerated: refresh tokens are
// always issued). It returns the scope granted.
func ParseScope(s string) (string, *Error) {
	for _, f := range strings.Fields(s) {
		if f != Scope && f != "offline_access" {
			return "", Errorf(ErrInvalidScope, "the only scope is mcp:read (read-only MCP access)")
		}
	}
	return Scope, nil
}
