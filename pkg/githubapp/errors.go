package githubapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"golang.org/x/oauth2"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// ErrRateLimited is matched (errors.Is) by every error that means GitHub
// asked CodeLotse to slow down: a primary rate limit (403 or 429 with
// X-RateLimit-Remaining: 0), a secondary limit (403 or 429 with GitHub's
// secondary-limit message) and any 429. errors.As with *RateLimitError
// gives the time to retry.
var ErrRateLimited = errors.New("GitHub rate limit reached")

// ErrSignInRejected is matched (errors.Is) when GitHub refused the sign-in:
// the authorization code was wrong, expired or already used, the PKCE
// verifier did not match, GitHub refused the app's credentials or callback
// URL, or GitHub answered 401 to the user token. The codelotse.Code tells
// the two apart: Forbidden means the person should start again, Unavailable
// means the app is misconfigured and retrying will not help.
var ErrSignInRejected = errors.New("GitHub rejected the sign-in")

// RateLimitError says when GitHub allows requests again.
type RateLimitError struct {
	// Status is the HTTP status of GitHub's answer: 403 or 429.
	Status int
	// Secondary is true for GitHub's secondary (abuse) limits.
	Secondary bool
	// RetryAt is when to try again, from Retry-After or X-RateLimit-Reset;
	// when GitHub gives neither, one minute after the answer, which is the
	// wait GitHub's documentation asks for.
	RetryAt time.Time
}

func (e *RateLimitError) Error() string {
	kind := "rate limit"
	if e.Secondary {
		kind = "secondary rate limit"
	}
	s := "GitHub " + kind + " reached"
	if e.Status != 0 {
		s += " (HTTP " + strconv.Itoa(e.Status) + ")"
	}
	return s + "; retry after " + e.RetryAt.UTC().Format(time.RFC3339)
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// secondaryWait is GitHub's documented minimum wait after a secondary limit
// that comes without Retry-After.
const secondaryWait = time.Minute

// apiError turns a go-github error into one with a code, a message for the
// person signing in and the failed operation as context. op names the call
// ("GET /user"), never its credentials.
func apiError(op string, resp *github.Response, err error, now time.Time) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: %w", op, err), "GitHub sign-in was interrupted; try again")
	}
	if rl := rateLimit(resp, err, now); rl != nil {
		return rateLimitedError(op, rl)
	}
	status := 0
	if resp != nil && resp.Response != nil {
		status = resp.StatusCode
	}
	if status == http.StatusUnauthorized {
		return codelotse.Wrap(codelotse.Forbidden,
			fmt.Errorf("githubapp: %s: %w: GitHub answered 401 to the user token", op, ErrSignInRejected),
			"GitHub rejected the sign-in; please sign in again")
	}
	return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: %w", op, err),
		"CodeLotse could not read your GitHub memberships; try again in a moment")
}

func rateLimitedError(op string, rl *RateLimitError) error {
	return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: %w", op, rl),
		"GitHub is rate limiting CodeLotse; try signing in again after "+rl.RetryAt.UTC().Format("15:04 UTC"))
}

// rateLimit recognises GitHub's rate-limit answers. go-github v62 maps a
// 403 with X-RateLimit-Remaining: 0 and a 403 whose documentation_url names
// the secondary limits, but leaves 429 and a secondary limit described only
// by its message as plain errors; all of them mean the same to a caller.
func rateLimit(resp *github.Response, err error, now time.Time) *RateLimitError {
	var primary *github.RateLimitError
	if errors.As(err, &primary) {
		rl := &RateLimitError{RetryAt: now.Add(secondaryWait)}
		if t := primary.Rate.Reset.Time; t.After(now) {
			rl.RetryAt = t
		}
		if r := primary.Response; r != nil {
			rl.Status = r.StatusCode
			if t, ok := retryAfter(r.Header, now); ok {
				rl.RetryAt = t
			}
		}
		return rl
	}
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) {
		rl := &RateLimitError{Secondary: true, RetryAt: now.Add(secondaryWait)}
		if abuse.RetryAfter != nil && *abuse.RetryAfter > 0 {
			rl.RetryAt = now.Add(*abuse.RetryAfter)
		}
		if abuse.Response != nil {
			rl.Status = abuse.Response.StatusCode
		}
		return rl
	}
	if resp == nil || resp.Response == nil {
		return nil
	}
	var message string
	var er *github.ErrorResponse
	if errors.As(err, &er) {
		message = er.Message + " " + er.DocumentationURL
	}
	secondary := strings.Contains(strings.ToLower(message), "secondary rate limit")
	exhausted := resp.Header.Get("X-RateLimit-Remaining") == "0"
	switch {
	case resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode == http.StatusForbidden && (secondary || exhausted):
	default:
		return nil
	}
	return rateLimitFromHeaders(resp.StatusCode, resp.Header, secondary || !exhausted, now)
}

// rateLimitFromHeaders reads the retry time the way GitHub documents it:
// Retry-After first, then X-RateLimit-Reset, else a minute.
func rateLimitFromHeaders(status int, h http.Header, secondary bool, now time.Time) *RateLimitError {
	rl := &RateLimitError{Status: status, Secondary: secondary, RetryAt: now.Add(secondaryWait)}
	if t, ok := retryAfter(h, now); ok {
		rl.RetryAt = t
	} else if v := h.Get("X-RateLimit-Reset"); v != "" {
		if sec, err := strconv.ParseInt(v, 10, 64); err == nil && sec > 0 {
			if t := time.Unix(sec, 0); t.After(now) {
				rl.RetryAt = t
			}
		}
	}
	return rl
}

// retryAfter parses Retry-After as seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Time, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return time.Time{}, false
	}
	if sec, err := strconv.ParseInt(v, 10, 64); err == nil && sec >= 0 {
		return now.Add(time.Duration(sec) * time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// exchangeError classifies a failed code exchange. x/oauth2's own error
// text may quote GitHub's response body, so only the status, GitHub's error
// code and its description are kept.
func exchangeError(err error, now time.Time) error {
	const op = "POST login/oauth/access_token"
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: %w", op, err), "GitHub sign-in was interrupted; try again")
	}
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		// A transport error or an answer without a token. x/oauth2 formats
		// these without the request body, which is where the code travels.
		return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: %w", op, err),
			"CodeLotse could not finish the sign-in with GitHub; try again in a moment")
	}
	status := 0
	var header http.Header
	if re.Response != nil {
		status = re.Response.StatusCode
		header = re.Response.Header
	}
	if status == http.StatusTooManyRequests || status == http.StatusForbidden && header.Get("X-RateLimit-Remaining") == "0" {
		return rateLimitedError(op, rateLimitFromHeaders(status, header, header.Get("X-RateLimit-Remaining") != "0", now))
	}
	detail := fmt.Sprintf("HTTP %d", status)
	if re.ErrorCode != "" {
		detail += " " + re.ErrorCode
	}
	if re.ErrorDescription != "" {
		detail += ": " + re.ErrorDescription
	}
	switch {
	case re.ErrorCode == "incorrect_client_credentials" || re.ErrorCode == "redirect_uri_mismatch" ||
		re.ErrorCode == "invalid_client" || re.ErrorCode == "unauthorized_client":
		// The person cannot fix this by trying again; the operator must.
		return codelotse.Wrap(codelotse.Unavailable,
			fmt.Errorf("githubapp: %s: %w: %s", op, ErrSignInRejected, detail),
			"GitHub rejected the sign-in because CodeLotse's GitHub App settings are wrong; tell your administrator")
	case re.ErrorCode != "" || status == http.StatusUnauthorized || status == http.StatusBadRequest:
		return codelotse.Wrap(codelotse.Forbidden,
			fmt.Errorf("githubapp: %s: %w: %s", op, ErrSignInRejected, detail),
			"GitHub rejected the sign-in; please sign in again")
	}
	return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: unexpected answer: %s", op, detail),
		"CodeLotse could not finish the sign-in with GitHub; try again in a moment")
}

// redacted hides secrets that must never reach an error string, whatever a
// misbehaving server echoes back. The text is cleaned once, when the error
// is made, so the secrets are not kept alive inside it. It keeps the chain,
// so errors.Is and errors.As still see the codelotse.Error, ErrRateLimited
// and ErrSignInRejected underneath.
type redacted struct {
	err error
	msg string
}

func (r *redacted) Error() string { return r.msg }

// GoString keeps %#v from printing the wrapped chain field by field.
func (r *redacted) GoString() string { return "githubapp.error(" + strconv.Quote(r.msg) + ")" }

func (r *redacted) Unwrap() error { return r.err }

func redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, secret := range secrets {
		if secret != "" {
			msg = strings.ReplaceAll(msg, secret, "[REDACTED]")
		}
	}
	return &redacted{err: err, msg: msg}
}
