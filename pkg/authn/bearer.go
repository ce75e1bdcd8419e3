// Package authn authenticates requests: personal access tokens on bearer
// routes (this file) and, later, web sessions on cookie routes. A bearer
// principal never comes from a cookie and a cookie principal never from a
// token.
//
// authn never logs, stores or forwards a token; only its SHA-256 is used to
// look it up.
package authn

import (
	"context"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/grants"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// Failure explains a refused bearer request. Reason is for logs and metrics
// (it never contains the token); Refresh asks the client's user to sign in
// to the web interface, which refreshes their cached GitHub access.
type Failure struct {
	Reason  string
	Refresh bool
}

// Bearer authenticates personal access tokens.
type Bearer struct {
	DB     *postgres.DB
	Logger *slog.Logger
	Now    func() time.Time

	// touched remembers when this process last recorded use of a token, so
	// that last_used_at costs at most one write a minute per token and
	// process, off the request's critical path.
	touched sync.Map // token id → time.Time
	touchWG sync.WaitGroup

	// facts are the facts of recently accepted tokens, the basis of
	// AuthenticateAhead's provisional decisions (never a decision itself:
	// every request still reads the token's facts, see ahead.go).
	facts factCache
}

// touchEvery is the resolution of last_used_at.
const touchEvery = time.Minute

// ParseAuthorization extracts the token from an Authorization header value:
// exactly "Bearer <token>" (the scheme is case-insensitive, RFC 9110 §11.1)
// with a well-formed clt_ token. Anything else is refused.
func ParseAuthorization(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !tokens.Valid(tok) {
		return "", false
	}
	return tok, true
}

// Result is the outcome of Authenticate.
type Result struct {
	Principal codelotse.Principal
	Grants    codelotse.Grants
	// Failure is set when the token itself is refused (ARCHITECTURE §4
	// steps 3 and 4): missing, malformed, unknown, revoked, expired, user
	// deleted, MCP off, identity provider disabled.
	Failure *Failure
	// GrantFailure is set when the token is valid but has no grants (step
	// 6); the caller applies the per-token rate limit (step 5) first.
	GrantFailure *Failure
	// Digest identifies the budget of per-token rate limits: the tenant and
	// the token's SHA-256, never the token; for an OAuth access token the
	// tenant and its grant, so that every access token of one grant (a
	// refresh leaves the earlier ones valid until they expire) shares one
	// budget and refreshing cannot multiply it (ARCHITECTURE §6.1).
	Digest string
}

// Authenticate checks a token and computes its grants (ARCHITECTURE §4 steps
// 3, 4 and 6) in one database round trip. A nil error with no failures means
// the principal may proceed.
//
// resource is the URL of the endpoint called (an OAuth access token is valid
// only at the resource it was issued for; the auth function enforces it).
// slug, when set, is the slug of a tenant-scoped endpoint (/t/{slug}/mcp):
// a token whose tenant that slug does not name now is refused there. (The
// token's facts carry its tenant's slug, so no lookup of the slug precedes
// authentication.)
func (b *Bearer) Authenticate(ctx context.Context, authorization, resource, slug string) (Result, error) {
	tok, ok := ParseAuthorization(authorization)
	if !ok {
		return refusedHeader(authorization), nil
	}
	return b.lookUp(ctx, tokens.Hash(tok), resource, slug)
}

// lookUp decides on the facts of the token whose SHA-256 is hash, read
// now, and remembers them when they are accepted.
func (b *Bearer) lookUp(ctx context.Context, hash []byte, resource, slug string) (Result, error) {
	f, found, err := b.DB.AuthToken(ctx, hash, resource)
	if err != nil {
		return Result{}, err
	}
	now := b.now()
	res := decide(f, found, hash, slug, now)
	if accepted(res) {
		b.facts.put(cacheKey(hash, resource), f)
		b.touch(f, now)
	}
	return res, nil
}

// refusedHeader is the refusal of an Authorization header that holds no
// well-formed token.
func refusedHeader(authorization string) Result {
	if authorization == "" {
		return Result{Failure: &Failure{Reason: "missing"}}
	}
	return Result{Failure: &Failure{Reason: "malformed"}}
}

// accepted reports whether a result lets the principal proceed.
func accepted(r Result) bool { return r.Failure == nil && r.GrantFailure == nil }

// decide is the decision on a token's facts at now: a pure function, so
// that a provisional decision on cached facts and the decision on the
// facts read during the request can be compared (see AuthenticateAhead).
func decide(f postgres.TokenFacts, found bool, hash []byte, slug string, now time.Time) Result {
	fail := func(reason string) Result { return Result{Failure: &Failure{Reason: reason}} }
	switch {
	case !found:
		return fail("unknown")
	case slug != "" && f.TenantSlug != slug:
		return fail("wrong_tenant")
	case f.RevokedAt != nil:
		return fail("revoked")
	case !now.Before(f.ExpiresAt):
		return fail("expired")
	case !f.UserActive:
		return fail("user_deleted")
	case !f.MCPEnabled:
		return fail("mcp_disabled")
	case f.IdPID != nil && (f.IdPEnabled == nil || !*f.IdPEnabled):
		return fail("idp_disabled")
	}
	res := Result{
		Principal: codelotse.Principal{TenantID: f.TenantID, UserID: f.UserID, TokenID: f.TokenID, Kind: "token"},
		Digest:    f.TenantID + ":" + hex.EncodeToString(hash),
	}
	if f.OAuthGrantID != nil {
		res.Digest = f.TenantID + ":grant:" + *f.OAuthGrantID
	}
	// The grant inputs came with the token facts (one round trip).
	var reason grants.Reason
	if f.IdPID != nil {
		res.Grants, reason = grants.OIDC(true, f.IdPGroups, f.Mappings)
	} else {
		res.Grants, reason = grants.GitHub(f.Membership, f.RepoIDs, now)
	}
	if reason != grants.OK {
		res.Grants = codelotse.Grants{}
		res.GrantFailure = &Failure{Reason: "no_grants_" + string(reason), Refresh: reason == grants.Stale}
	}
	return res
}

// touch records use of the token in the background when the stored
// last_used_at and this process's memory are both older than a minute.
func (b *Bearer) touch(f postgres.TokenFacts, now time.Time) {
	if f.LastUsedAt != nil && now.Sub(*f.LastUsedAt) < touchEvery {
		return
	}
	if v, ok := b.touched.Load(f.TokenID); ok && now.Sub(v.(time.Time)) < touchEvery {
		return
	}
	b.touched.Store(f.TokenID, now)
	b.touchWG.Add(1)
	go func() {
		defer b.touchWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := b.DB.Tenant(f.TenantID).TouchToken(ctx, f.TokenID); err != nil && b.Logger != nil {
			b.Logger.Warn("recording token use failed", "token_id", f.TokenID, "err", err)
		}
		b.pruneTouched(now)
	}()
}

// pruneTouched forgets entries older than touchEvery so the map stays small.
func (b *Bearer) pruneTouched(now time.Time) {
	b.touched.Range(func(k, v any) bool {
		if now.Sub(v.(time.Time)) > 2*touchEvery {
			b.touched.Delete(k)
		}
		return true
	})
}

// Wait blocks until background writes have finished (shutdown and tests).
func (b *Bearer) Wait() { b.touchWG.Wait() }

func (b *Bearer) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}
