package oidc

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// The kinds of failure, for errors.Is. Each says who has to act, so the sign-in
// page can tell the member whether to try again or to ask their administrator.
var (
	// ErrConfig: the tenant's provider settings are unusable (no issuer or
	// client id, an issuer that is neither https nor loopback http) or the
	// caller passed an empty state, nonce or malformed verifier. An
	// administrator or a programmer has to act.
	ErrConfig = errors.New("oidc: invalid sign-in configuration")
	// ErrProvider: discovery, the key set or the userinfo endpoint could not be
	// reached or read. Usually transient, or a wrong issuer URL.
	ErrProvider = errors.New("oidc: the identity provider is unavailable or misconfigured")
	// ErrExchange: the provider refused the authorization code (expired, used
	// twice, wrong PKCE verifier, wrong client secret or redirect URL).
	// Starting the sign-in again usually helps, unless the secret is wrong.
	ErrExchange = errors.New("oidc: the identity provider refused the sign-in code")
	// ErrIDToken: the ID token failed verification (issuer, audience,
	// authorized party, expiry, signature, nonce) or has no subject. The
	// sign-in must not proceed; the details are for the log.
	ErrIDToken = errors.New("oidc: the ID token is not valid for this sign-in")
	// ErrNoGroupsClaim: the provider sent neither in the ID token nor at the
	// userinfo endpoint the groups claim the tenant configured. Always
	// wrapped in a *GroupsClaimError that names the claim.
	ErrNoGroupsClaim = errors.New("oidc: the identity provider did not send the groups claim")
	// ErrInvalidGroupsClaim: the groups claim is there but is neither a
	// string nor an array of strings. Always wrapped in a *GroupsClaimError.
	ErrInvalidGroupsClaim = errors.New("oidc: the groups claim is not a string or an array of strings")
)

// GroupsClaimError names the groups claim that was missing or malformed, so
// the page can say "your provider did not send the groups claim 'groups'"
// and the administrator knows which mapper or setting to fix. Its Problem is
// ErrNoGroupsClaim or ErrInvalidGroupsClaim.
type GroupsClaimError struct {
	Claim   string
	Problem error
	// Detail is an optional explanation for the log (for example why the
	// userinfo endpoint could not be asked instead), already redacted.
	Detail string
}

func (e *GroupsClaimError) Error() string {
	var msg string
	if errors.Is(e.Problem, ErrInvalidGroupsClaim) {
		msg = fmt.Sprintf("oidc: the groups claim %q is not a string or an array of strings", e.Claim)
	} else {
		msg = fmt.Sprintf("oidc: the identity provider did not send the groups claim %q", e.Claim)
	}
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

func (e *GroupsClaimError) Unwrap() error { return e.Problem }

// maxDetail bounds the part of an error that comes from the provider: a
// misconfigured issuer can answer discovery with a whole HTML page, and it
// would end up in the log line.
const maxDetail = 300

// fail wraps kind with a detail that has every secret replaced and is cut to
// maxDetail bytes. All errors that carry text from the provider or from a
// library go through here, because that text can quote what was sent (a
// provider may echo the code in its error_description; a JSON decoding error
// can quote a token).
func fail(kind error, detail string, secrets ...string) error {
	return fmt.Errorf("%w: %s", kind, redact(detail, secrets...))
}

func redact(s string, secrets ...string) string {
	for _, secret := range secrets {
		// An empty value would match everywhere and a very short one would
		// garble ordinary words; codes, tokens and secrets are long.
		if len(secret) < 4 {
			continue
		}
		s = strings.ReplaceAll(s, secret, "[redacted]")
		// A provider may echo a value as it was sent in a form or URL.
		if escaped := url.QueryEscape(secret); escaped != secret {
			s = strings.ReplaceAll(s, escaped, "[redacted]")
		}
	}
	if len(s) > maxDetail {
		cut := maxDetail
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
