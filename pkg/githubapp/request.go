package githubapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// How the App retries. GitHub asks clients to back off on 5xx answers and
// to wait out rate limits; the bounds keep a sync job from hanging: a job
// that cannot finish within them fails, and River retries it later.
var defaultRetry = retryPolicy{
	attempts: 5,
	budget:   60 * time.Second,
	base:     500 * time.Millisecond,
	cap:      8 * time.Second,
}

const (
	// attemptTimeout bounds one API request, body included, so a stalled
	// connection is retried instead of holding the sync.
	attemptTimeout = 60 * time.Second
	// maxResponseBytes bounds one API answer held in memory. A page of
	// 100 review comments with their diff hunks is a few MiB at most.
	maxResponseBytes = 32 << 20
	// maxErrorBytes bounds an error answer read for its message.
	maxErrorBytes = 1 << 20
	// syncMaxPages bounds every listing of the sync: at 100 items a page,
	// 30,000 repositories, pull requests, reviews, comments or alerts of
	// one state. Past it the listing fails instead of being truncated.
	syncMaxPages = 300
	// apiVersion pins the REST API version the payload shapes are from.
	apiVersion = "2022-11-28"
)

type retryPolicy struct {
	// attempts is the most requests made for one call.
	attempts int
	// budget is the most time spent waiting between them.
	budget time.Duration
	// base and cap shape the exponential backoff after 5xx answers and
	// connection errors.
	base, cap time.Duration
}

// backoff is the wait before retry n (1-based): exponential, capped, with
// "equal jitter" (half fixed, half random), so that workers that failed
// together do not retry together yet each waits a while.
func (p retryPolicy) backoff(n int) time.Duration {
	d := p.base << (n - 1)
	if d > p.cap || d <= 0 {
		d = p.cap
	}
	return d/2 + rand.N(d/2+1)
}

// clock is time for the retry loop and the token cache; tests replace it
// to run without waiting.
type clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// limiter remembers the latest rate limit GitHub announced for one set of
// credentials, so that concurrent and later requests wait it out (or fail
// at once) instead of each being refused again, which GitHub punishes
// with longer secondary limits.
type limiter struct {
	mu sync.Mutex
	rl *RateLimitError
}

func (l *limiter) blocked(now time.Time) *RateLimitError {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rl == nil || !now.Before(l.rl.RetryAt) {
		return nil
	}
	rl := *l.rl
	return &rl
}

func (l *limiter) block(rl *RateLimitError) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rl == nil || rl.RetryAt.After(l.rl.RetryAt) {
		c := *rl
		l.rl = &c
	}
}

// credential is how a request authenticates: as the app or as an
// installation.
type credential interface {
	// authorization returns the Authorization header value and the secret
	// in it, which errors must never show.
	authorization(ctx context.Context) (header, secret string, err error)
	// rejected is told that GitHub answered 401 to secret, and reports
	// whether a fresh credential might be accepted.
	rejected(secret string) bool
}

// authKey carries a request's Authorization value to authTransport.
type authKey struct{}

// authTransport adds the Authorization header to requests for the API's
// own scheme, host and port, and to no other. Setting the header on the
// request instead would let net/http forward it on a redirect to a
// subdomain (GitHub Enterprise Server's codeload.HOST for archives), and
// go-github's own token transports add it to any host.
type authTransport struct {
	origin *url.URL
	base   http.RoundTripper
}

func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if v, ok := r.Context().Value(authKey{}).(string); ok && v != "" && sameOrigin(r.URL, t.origin) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", v)
	}
	return t.base.RoundTrip(r)
}

// sameOrigin compares scheme, host and port, with default ports made
// explicit.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// request is one call to GitHub, made with retries by App.do.
type request struct {
	// op names the call in errors ("GET /repos/acme/api/pulls (page 2)").
	// It never holds credentials, and never the URL of an archive
	// download, whose query carries a token.
	op     string
	method string // GET unless set
	url    string
	accept string
	// cred authenticates the request; nil sends no credentials.
	cred credential
	// limit is the rate-limit memory of cred; nil for downloads.
	limit *limiter
	// follow follows redirects; otherwise a 3xx is returned to the caller.
	follow bool
	// stream returns a successful answer with its body unread. The
	// request then has no per-attempt timeout: the caller bounds it.
	stream bool
	// body is sent as JSON (GraphQL queries).
	body []byte
	// idempotent lets a POST be retried like a GET: a GraphQL query
	// reads and changes nothing.
	idempotent bool
	// etag, when set, is sent as If-None-Match; a 304 answer is returned
	// as a success with status 304 and no body (see etagCache).
	etag string
}

// statusError is GitHub's answer to a failed request.
type statusError struct {
	Status  int
	Message string
	header  http.Header
	rl      *RateLimitError
}

func (e *statusError) Error() string {
	s := "HTTP " + strconv.Itoa(e.Status)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// errRedirectLoop ends a chain of more than ten redirects.
var errRedirectLoop = errors.New("stopped after 10 redirects")

// transportError is a failure to get an answer at all: a connection
// error, a timeout, or a body cut short.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// do sends rq, retrying what may be retried, and returns the first answer
// that is a success (2xx, or a 3xx when rq.follow is false). Unless
// rq.stream, the body is read and returned, and resp.Body is closed.
//
// Only GETs are retried: 5xx answers, connection errors and timeouts with
// exponential backoff and jitter; rate limits after the wait GitHub asks
// for (Retry-After, X-RateLimit-Reset, or a minute for a secondary limit
// without either); a 401 once, with a fresh installation token. At most
// retry.attempts requests are made and retry.budget spent waiting, and no
// wait outlasts the context. Every error is a *codelotse.Error whose text
// shows no credential.
func (a *App) do(ctx context.Context, rq *request) (resp *http.Response, body []byte, err error) {
	method := rq.method
	if method == "" {
		method = http.MethodGet
	}
	retry := method == http.MethodGet || rq.idempotent
	var secret string
	defer func() {
		if err != nil {
			err = redact(err, secret)
		}
	}()
	var waited time.Duration
	reauthorized := false
	for attempt := 1; ; attempt++ {
		// A rate limit another request met with the same credentials
		// applies to this one too.
		if rl := rq.limit.blocked(a.clock.Now()); rl != nil {
			wait := rl.RetryAt.Sub(a.clock.Now())
			if !retry || !a.canWait(ctx, waited, wait) {
				return nil, nil, rateLimited(rq.op, rl)
			}
			if err := a.clock.Sleep(ctx, wait); err != nil {
				return nil, nil, interrupted(rq.op, err)
			}
			waited += wait
		}
		header := ""
		if rq.cred != nil {
			header, secret, err = rq.cred.authorization(ctx)
			if err != nil {
				return nil, nil, err
			}
		}
		resp, body, err = a.attempt(ctx, rq, method, header, secret)
		if err == nil {
			return resp, body, nil
		}
		if ctx.Err() != nil {
			return nil, nil, interrupted(rq.op, ctx.Err())
		}

		var wait time.Duration
		var se *statusError
		var rl *RateLimitError
		switch {
		case errors.As(err, new(*transportError)):
			wait = a.retry.backoff(attempt)
		case !errors.As(err, &se):
			return nil, nil, failed(rq.op, err)
		case se.rl != nil:
			rl = se.rl
			rq.limit.block(rl)
			wait = max(rl.RetryAt.Sub(a.clock.Now()), 0)
			// A little jitter, so that workers held by one limit do not
			// all come back in the same instant, if it fits the budget.
			if j := rand.N(min(wait/10, time.Second) + 1); a.canWait(ctx, waited, wait+j) {
				wait += j
			}
		case se.Status == http.StatusUnauthorized && rq.cred != nil && !reauthorized && rq.cred.rejected(secret):
			reauthorized = true
		case se.Status >= 500:
			wait = a.retry.backoff(attempt)
			if t, ok := retryAfter(se.header, a.clock.Now()); ok {
				wait = max(wait, t.Sub(a.clock.Now()))
			}
		default:
			return nil, nil, failed(rq.op, err)
		}
		if !retry || attempt >= a.retry.attempts || !a.canWait(ctx, waited, wait) {
			if rl != nil {
				return nil, nil, rateLimited(rq.op, rl)
			}
			return nil, nil, failed(rq.op, err)
		}
		if err := a.clock.Sleep(ctx, wait); err != nil {
			return nil, nil, interrupted(rq.op, err)
		}
		waited += wait
	}
}

// canWait reports whether waiting d more stays within the retry budget and
// before the context's deadline. Waiting past the deadline would only turn
// an informative error into "context deadline exceeded".
func (a *App) canWait(ctx context.Context, waited, d time.Duration) bool {
	if waited+d > a.retry.budget {
		return false
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= d {
		return false
	}
	return true
}

// attempt sends the request once.
func (a *App) attempt(ctx context.Context, rq *request, method, authorization, secret string) (*http.Response, []byte, error) {
	if !rq.stream {
		// A streamed body outlives this call; its caller bounds it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
	}
	if authorization != "" {
		ctx = context.WithValue(ctx, authKey{}, authorization)
	}
	var body io.Reader
	if rq.body != nil {
		body = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rq.url, body)
	if err != nil {
		// *url.Error repeats the URL; see below.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, fmt.Errorf("cannot build the request: %w", err)
	}
	accept := rq.accept
	if accept == "" {
		accept = "application/vnd.github+json"
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "codelotse")
	req.Header.Set("X-GitHub-Api-Version", apiVersion)
	if rq.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if rq.etag != "" {
		req.Header.Set("If-None-Match", rq.etag)
	}

	var client *http.Client
	switch {
	case !rq.follow:
		client = a.noFollow
	case rq.stream:
		client = a.download
	default:
		client = a.follow
	}
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error repeats the URL, and an archive download's URL
		// carries a token in its query; op says which call failed.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, errRedirectLoop) {
			return nil, nil, err
		}
		return nil, nil, &transportError{err}
	}
	status := resp.StatusCode
	if status == http.StatusNotModified && rq.etag != "" {
		// The cached answer is still current; GitHub does not count a
		// 304 against the rate limit.
		resp.Body.Close()
		resp.Body = http.NoBody
		return resp, nil, nil
	}
	switch {
	case status >= 200 && status < 300 || !rq.follow && status >= 300 && status < 400:
		if rq.stream {
			return resp, nil, nil
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
		if err != nil {
			return nil, nil, &transportError{err}
		}
		if len(body) > maxResponseBytes {
			return nil, nil, fmt.Errorf("the answer is larger than %d MiB", maxResponseBytes>>20)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, body, nil
	}
	defer resp.Body.Close()
	resp.Body = io.NopCloser(io.LimitReader(resp.Body, maxErrorBytes))
	se := a.statusError(resp)
	if secret != "" {
		// A server that echoes the request must not plant the credential
		// in an error message, where no later redaction can reach it.
		se.Message = strings.ReplaceAll(se.Message, secret, "[REDACTED]")
	}
	return nil, nil, se
}

// statusError reads GitHub's error answer: its message, and whether it is
// a rate limit (go-github's classification, completed by rateLimit).
func (a *App) statusError(resp *http.Response) *statusError {
	gerr := github.CheckResponse(resp)
	se := &statusError{Status: resp.StatusCode, header: resp.Header}
	var er *github.ErrorResponse
	var primary *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	switch {
	case errors.As(gerr, &er):
		se.Message = er.Message
	case errors.As(gerr, &primary):
		se.Message = primary.Message
	case errors.As(gerr, &abuse):
		se.Message = abuse.Message
	}
	if len(se.Message) > 300 {
		se.Message = se.Message[:300] + "…"
	}
	se.rl = rateLimit(&github.Response{Response: resp}, gerr, a.clock.Now())
	return se
}

// getJSON GETs rq and decodes the JSON answer into v.
func (a *App) getJSON(ctx context.Context, rq *request, v any) error {
	rq.follow = true
	_, body, err := a.do(ctx, rq)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: cannot decode the answer: %w", rq.op, err),
			"GitHub returned an answer CodeLotse cannot read; try again in a moment")
	}
	return nil
}

// interrupted is the error for a call whose context ended.
func interrupted(op string, err error) error {
	return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: %w", op, err), "the GitHub request was interrupted")
}

// rateLimited is the error for a rate limit that could not be waited out.
// It matches ErrRateLimited, and *RateLimitError says when to try again.
func rateLimited(op string, rl *RateLimitError) error {
	return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: %w", op, rl),
		"GitHub is rate limiting CodeLotse; try again after "+rl.RetryAt.UTC().Format("15:04:05 UTC"))
}

// failed classifies a final failure for the worker: the code says whether
// retrying can help, and the sentinel errors say what to tell an operator.
func failed(op string, err error) error {
	cause := fmt.Errorf("githubapp: %s: %w", op, err)
	var se *statusError
	if !errors.As(err, &se) {
		if errors.As(err, new(*transportError)) {
			return codelotse.Wrap(codelotse.Unavailable, cause, "GitHub could not be reached; try again in a moment")
		}
		return codelotse.Wrap(codelotse.Unavailable, cause, "GitHub returned an answer CodeLotse cannot use; try again in a moment")
	}
	switch {
	case se.Status == http.StatusUnauthorized:
		return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: %w: %w", op, ErrAppRejected, err),
			"GitHub rejected the GitHub App's credentials; check GITHUB_APP_ID, the private key and the server's clock")
	case se.Status == http.StatusForbidden:
		return codelotse.Wrap(codelotse.Forbidden, cause,
			"GitHub refused the request; the GitHub App may lack a permission (GitHub said: "+se.Message+")")
	case se.Status == http.StatusNotFound:
		return codelotse.Wrap(codelotse.NotFound, cause, "GitHub does not show this to the GitHub App: it does not exist or is not part of the installation")
	case se.Status == http.StatusConflict:
		return codelotse.Wrap(codelotse.Conflict, cause, "GitHub cannot answer for this repository's current state (GitHub said: "+se.Message+")")
	case se.Status == http.StatusUnprocessableEntity:
		return codelotse.Wrap(codelotse.Invalid, cause, "GitHub refused the request as invalid (GitHub said: "+se.Message+")")
	case se.Status >= 500:
		return codelotse.Wrap(codelotse.Unavailable, cause, "GitHub is unavailable; try again in a moment")
	}
	return codelotse.Wrap(codelotse.Unavailable, cause, "GitHub returned an unexpected answer; try again in a moment")
}

// nextLink returns the rel="next" target of a Link header, or "".
func nextLink(h http.Header) string {
	for _, v := range h.Values("Link") {
		for _, part := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			target = strings.TrimSpace(target)
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(val), `"`)) {
					if strings.EqualFold(rel, "next") {
						return target[1 : len(target)-1]
					}
				}
			}
		}
	}
	return ""
}
