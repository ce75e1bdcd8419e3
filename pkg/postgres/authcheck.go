package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// AuthCheck is a token lookup that rides along with a request's first
// tenant read (issue 11: one PostgreSQL round trip for authentication,
// grants and the tool's first read).
//
// The caller authenticated the request provisionally from facts it had
// cached, and attached an AuthCheck to the request's context
// (WithAuthCheck). The first TenantDB read on that context queues the
// auth_token call in front of its own statements, in the same pipeline, and
// records the fresh facts here; the caller then compares them with the
// facts it decided on (AuthCheck.Facts) before anything the read returned
// is shown to anyone. Reads are read-only, so a read made for a token that
// turns out to have been revoked has no effect but its discarded answer.
//
// With the facts the caller decided on (WithCached), the read brings along
// only the tenant's authentication epoch (migration 0062), a primary-key
// read instead of auth_token's joins: while it equals the epoch those facts
// were read at, nothing auth_token reads has changed since (every
// transaction with such a change sets a new epoch as it commits), so they
// are the facts auth_token would return now. When it differs, the check
// stays undone and Facts looks the token up in full.
//
// An AuthCheck serves one request; its methods are safe for concurrent use.
type AuthCheck struct {
	hash     []byte
	resource string
	cached   *TokenFacts // nil: ride along with the full lookup
	byEpoch  bool        // the facts are cached ones, confirmed by the epoch

	mu      sync.Mutex
	claimed bool // a read has queued the lookup and not yet failed
	done    bool
	facts   TokenFacts
	found   bool
}

// NewAuthCheck returns the check of the token whose SHA-256 is hash at
// resource (as for DB.AuthToken).
func NewAuthCheck(hash []byte, resource string) *AuthCheck {
	return &AuthCheck{hash: hash, resource: resource}
}

// WithCached makes c confirm f, the facts a lookup of the same token at the
// same resource returned earlier, by the tenant's epoch alone, and returns
// c. Call it before the check is attached to a context.
func (c *AuthCheck) WithCached(f TokenFacts) *AuthCheck {
	c.cached = &f
	return c
}

// byEpochOf reports whether a read of tenantID may confirm the cached
// facts by its epoch (false: the read brings the full lookup along). Only
// the token's own tenant's epoch says anything about its facts.
func (c *AuthCheck) byEpochOf(tenantID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cached != nil && c.cached.TenantID == tenantID
}

// setEpoch records the epoch a read brought along: the cached facts when it
// is theirs; else the cached facts are given up, and a later read brings
// the full lookup along (or Facts makes it).
func (c *AuthCheck) setEpoch(epoch int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claimed = false
	if epoch == c.cached.Epoch {
		c.facts, c.found, c.done, c.byEpoch = *c.cached, true, true, true
	} else {
		c.cached = nil
	}
}

type authCheckKey struct{}

// WithAuthCheck returns ctx carrying c for the first tenant read made on it.
func WithAuthCheck(ctx context.Context, c *AuthCheck) context.Context {
	return context.WithValue(ctx, authCheckKey{}, c)
}

// claim hands the lookup to one read; false when another read has it or it
// is done.
func (c *AuthCheck) claim() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.claimed || c.done {
		return false
	}
	c.claimed = true
	return true
}

// release gives the lookup back after the read that claimed it failed
// before the facts were read, so that Facts looks them up on its own.
func (c *AuthCheck) release() {
	c.mu.Lock()
	c.claimed = false
	c.mu.Unlock()
}

func (c *AuthCheck) set(f TokenFacts, found bool) {
	c.mu.Lock()
	c.facts, c.found, c.done, c.claimed = f, found, true, false
	c.mu.Unlock()
}

// Facts returns the token's facts as read during this request: those a
// read brought along, or, when no read did (a method that reads nothing, a
// read that failed), a lookup of their own through db.
func (c *AuthCheck) Facts(ctx context.Context, db *DB) (f TokenFacts, found, rode bool, err error) {
	defer wrap(&err, "postgres.Facts")
	c.mu.Lock()
	if c.done {
		f, found = c.facts, c.found
		c.mu.Unlock()
		return f, found, true, nil
	}
	c.mu.Unlock()
	f, found, err = db.AuthToken(ctx, c.hash, c.resource)
	return f, found, false, err
}

// authTokenSQL is the one statement of DB.AuthToken and of an AuthCheck.
const authTokenSQL = `SELECT token_id::text, tenant_id::text, user_id::text, expires_at, revoked_at,
		last_used_at, user_active, mcp_enabled, idp_id::text, idp_enabled, idp_groups,
		member_role, member_source, member_since, repo_ids, map_groups, map_roles, map_repo_ids, oauth_grant_id::text, coalesce(tenant_slug, ''),
		auth_epoch
	FROM auth_token($1, $2)`

// authEpochSQL is the tenant's authentication epoch, as auth_token reads it
// (run after the tenant is set: the runtime role reads only its tenant's).
const authEpochSQL = `SELECT coalesce((SELECT epoch FROM auth_epochs WHERE tenant_id = $1), 0)`

// scanTokenFacts reads auth_token's row (found is false when there is none).
func scanTokenFacts(row pgx.Row) (f TokenFacts, found bool, err error) {
	var role, source *string
	var since *time.Time
	var groups, roles []string
	var repos []int64
	err = row.Scan(&f.TokenID, &f.TenantID, &f.UserID, &f.ExpiresAt, &f.RevokedAt, &f.LastUsedAt, &f.UserActive,
		&f.MCPEnabled, &f.IdPID, &f.IdPEnabled, &f.IdPGroups, &role, &source, &since, &f.RepoIDs, &groups, &roles, &repos, &f.OAuthGrantID, &f.TenantSlug, &f.Epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return TokenFacts{}, false, nil
	}
	if err != nil {
		return TokenFacts{}, false, err
	}
	if role != nil {
		f.Membership = &codelotse.Membership{Role: codelotse.Role(*role), Source: *source, RefreshedAt: *since}
	}
	for i := range groups {
		m := codelotse.GroupMapping{Group: groups[i], Role: codelotse.Role(roles[i])}
		if repos[i] != 0 {
			id := repos[i]
			m.RepositoryID = &id
		}
		f.Mappings = append(f.Mappings, m)
	}
	return f, true, nil
}
