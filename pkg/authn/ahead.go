package authn

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// Authentication ahead of the facts (issue 11: at most one PostgreSQL round
// trip per request for the token, its grants and the tool's first read).
//
// A request whose token was accepted recently is let through provisionally
// on the facts cached from then, and the token is looked up again in the
// same pipeline as the request's first tenant read (postgres.AuthCheck).
// Before the answer leaves, Confirm decides again on the facts read during
// the request and compares: the answer is released only when both
// decisions are the same principal with the same grants. Otherwise it is
// discarded and the request is authenticated from scratch. So a revoked or
// expired token, a deleted user, MCP switched off, a disabled identity
// provider, a removed mapping or membership refuses (or narrows) the very
// next request, exactly as without the cache: the cache only saves the
// round trip of the lookup, never the check.
//
// The check itself is cheap while nothing changed: the read brings along
// only the tenant's authentication epoch, which every transaction that
// changes what auth_token reads sets anew as it commits (migration 0062,
// policies/tenancy.sql). An unchanged epoch confirms the cached facts as
// they are; a new one makes Confirm decide on a full lookup, as above.

// maxCachedFacts bounds the cache: a token's facts are a few hundred bytes
// plus 8 bytes per granted repository.
const maxCachedFacts = 4096

// factCache maps a token (its hash and the resource it was used at) to its
// facts when it was last accepted.
type factCache struct {
	mu sync.Mutex
	m  map[string]postgres.TokenFacts
}

func cacheKey(hash []byte, resource string) string { return resource + "\x00" + string(hash) }

func (c *factCache) get(k string) (postgres.TokenFacts, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[k]
	return f, ok
}

func (c *factCache) put(k string, f postgres.TokenFacts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]postgres.TokenFacts)
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= maxCachedFacts {
		// Any entry may go: a missing entry costs one round trip.
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = f
}

func (c *factCache) drop(k string) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

// Pending is a provisional authentication awaiting its confirmation.
type Pending struct {
	b     *Bearer
	key   string
	hash  []byte
	slug  string
	now   time.Time
	res   Result
	check *postgres.AuthCheck
}

// AuthenticateAhead is Authenticate that may decide on cached facts. When
// it does, it returns a non-nil Pending: the caller runs the request on a
// context from Pending.Context and must call Pending.Confirm before
// anything the request produced leaves the process. Only acceptances are
// provisional: a refusal is always decided on facts read now.
// resource and slug are Authenticate's.
func (b *Bearer) AuthenticateAhead(ctx context.Context, authorization, resource, slug string) (Result, *Pending, error) {
	tok, ok := ParseAuthorization(authorization)
	if !ok {
		return refusedHeader(authorization), nil, nil
	}
	hash := tokens.Hash(tok)
	key := cacheKey(hash, resource)
	if f, ok := b.facts.get(key); ok {
		now := b.now()
		if res := decide(f, true, hash, slug, now); accepted(res) {
			return res, &Pending{b: b, key: key, hash: hash, slug: slug, now: now, res: res,
				check: postgres.NewAuthCheck(hash, resource).WithCached(f)}, nil
		}
	}
	res, err := b.lookUp(ctx, hash, resource, slug)
	return res, nil, err
}

// Context returns ctx carrying the check that the request's first tenant
// read brings along.
func (p *Pending) Context(ctx context.Context) context.Context {
	return postgres.WithAuthCheck(ctx, p.check)
}

// Confirm decides again, on the token's facts read during the request (or
// now, when the request read nothing), at the same instant as the
// provisional decision. true: the same principal with the same grants, and
// what the request produced may be released. false: the facts changed and
// it must be discarded; the caller authenticates the request again.
func (p *Pending) Confirm(ctx context.Context) (bool, error) {
	f, found, _, err := p.check.Facts(ctx, p.b.DB)
	if err != nil {
		return false, err
	}
	res := decide(f, found, p.hash, p.slug, p.now)
	if !accepted(res) || !sameCaller(res, p.res) {
		p.b.facts.drop(p.key)
		return false, nil
	}
	p.b.facts.put(p.key, f)
	p.b.touch(f, p.now)
	return true, nil
}

// sameCaller reports whether two acceptances let the same principal see the
// same repositories.
func sameCaller(a, b Result) bool {
	ga, gb := a.Grants, b.Grants
	return a.Principal == b.Principal && a.Digest == b.Digest &&
		ga.Admin == gb.Admin && ga.Source == gb.Source && ga.AsOf.Equal(gb.AsOf) &&
		slices.Equal(ga.RepoIDs, gb.RepoIDs) && slices.Equal(ga.Groups, gb.Groups)
}
