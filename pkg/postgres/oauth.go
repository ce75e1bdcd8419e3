package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/oauth"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// OAuthClient is a client of a tenant's authorization server.
type OAuthClient struct {
	Ref          string // row id
	ClientID     string
	Kind         string // cimd, dcr
	Name         string
	ClientURI    string
	RedirectURIs []string
	CacheUntil   *time.Time
	ETag         string
}

// Client is the pure form of c.
func (c OAuthClient) Client() oauth.Client {
	return oauth.Client{ClientID: c.ClientID, Name: c.Name, RedirectURIs: c.RedirectURIs, ClientURI: c.ClientURI}
}

// GetOAuthClient reads a client by client_id; a dynamic registration past
// its unused expiry is not found.
func (tx *Tx) GetOAuthClient(ctx context.Context, clientID string) (_ OAuthClient, _ bool, err error) {
	defer wrap(&err, "postgres.GetOAuthClient")
	tenantID := tx.tenantID
	c := OAuthClient{ClientID: clientID}
	err = tx.q.QueryRow(ctx, `SELECT id::text, kind, name, client_uri, redirect_uris, cache_until, etag FROM oauth_clients
		WHERE tenant_id = $1 AND client_id = $2 AND (expires_at IS NULL OR expires_at > now())`, tenantID, clientID).
		Scan(&c.Ref, &c.Kind, &c.Name, &c.ClientURI, &c.RedirectURIs, &c.CacheUntil, &c.ETag)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	return c, err == nil, err
}

// OAuthClientKnown reports whether the tenant ever registered or fetched
// the metadata document of clientID. Unlike GetOAuthClient it counts a
// registration past its unused expiry that RegisterClient has not deleted
// yet: a code given to it minutes before expiry is still exchanged (and the
// exchange extends it).
func (tx *Tx) OAuthClientKnown(ctx context.Context, clientID string) (_ bool, err error) {
	defer wrap(&err, "postgres.OAuthClientKnown")
	var known bool
	err = tx.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oauth_clients WHERE tenant_id = $1 AND client_id = $2)`,
		tx.tenantID, clientID).Scan(&known)
	return known, err
}

// SaveMetadataClient stores (or refreshes) the cached metadata document of a
// URL client_id and returns the row id. Stored documents that no grant or
// code refers to and that were neither fetched nor used for
// oauth.MetadataUnusedTTL are deleted first: they would be fetched again
// before any use, and without the sweep every client_id a member's browser
// was sent to would stay a row for ever.
func (tx *Tx) SaveMetadataClient(ctx context.Context, c oauth.Client, cacheUntil time.Time, etag string) (_ string, err error) {
	defer wrap(&err, "postgres.SaveMetadataClient")
	tenantID := tx.tenantID
	if _, err := tx.q.Exec(ctx, `DELETE FROM oauth_clients cl
		WHERE cl.tenant_id = $1 AND cl.kind = 'cimd'
		  AND greatest(cl.created_at, cl.fetched_at, cl.last_used_at) < now() - make_interval(secs => $2)
		  AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.tenant_id = $1 AND g.client_ref = cl.id)
		  AND NOT EXISTS (SELECT 1 FROM oauth_codes k WHERE k.tenant_id = $1 AND k.client_ref = cl.id)`,
		tenantID, oauth.MetadataUnusedTTL.Seconds()); err != nil {
		return "", err
	}
	var ref string
	err = tx.q.QueryRow(ctx, `INSERT INTO oauth_clients (tenant_id, client_id, kind, name, client_uri, redirect_uris, fetched_at, cache_until, etag)
		VALUES ($1, $2, 'cimd', $3, $4, $5, now(), $6, $7)
		ON CONFLICT (tenant_id, client_id) DO UPDATE SET name = EXCLUDED.name, client_uri = EXCLUDED.client_uri,
			redirect_uris = EXCLUDED.redirect_uris, fetched_at = now(), cache_until = EXCLUDED.cache_until, etag = EXCLUDED.etag
		WHERE oauth_clients.kind = 'cimd'
		RETURNING id::text`, tenantID, c.ClientID, c.Name, c.ClientURI, c.RedirectURIs, cacheUntil, etag).Scan(&ref)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", codelotse.Errorf(codelotse.Conflict, "client_id is taken by a registered client")
	}
	return ref, err
}

// ExtendMetadataCache records a successful revalidation (304) of a cached
// metadata document.
func (tx *Tx) ExtendMetadataCache(ctx context.Context, ref string, cacheUntil time.Time) (err error) {
	defer wrap(&err, "postgres.ExtendMetadataCache")
	tenantID := tx.tenantID
	_, err = tx.q.Exec(ctx, `UPDATE oauth_clients SET fetched_at = now(), cache_until = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, ref, cacheUntil)
	return err
}

// RegisterClient stores a dynamic registration (RFC 7591). Registrations
// that expired unused are deleted first, with everything they issued (the
// grants of a registration keep it alive: every use extends it).
func (tx *Tx) RegisterClient(ctx context.Context, c oauth.Client, now time.Time) (err error) {
	defer wrap(&err, "postgres.RegisterClient")
	tenantID := tx.tenantID
	if _, err := tx.q.Exec(ctx, `DELETE FROM oauth_clients WHERE tenant_id = $1 AND kind = 'dcr' AND expires_at < $2`, tenantID, now); err != nil {
		return err
	}
	_, err = tx.q.Exec(ctx, `INSERT INTO oauth_clients (tenant_id, client_id, kind, name, client_uri, redirect_uris, created_at, expires_at)
		VALUES ($1, $2, 'dcr', $3, $4, $5, $6, $7)`, tenantID, c.ClientID, c.Name, c.ClientURI, c.RedirectURIs, now, now.Add(oauth.ClientUnusedTTL))
	return err
}

// touchClient records use of a client; a registration's unused expiry is
// pushed out, never shortened, and never beyond its grants' lifetime.
func (tx *Tx) touchClient(ctx context.Context, ref string, now time.Time) error {
	tenantID := tx.tenantID
	_, err := tx.q.Exec(ctx, `UPDATE oauth_clients SET last_used_at = $3,
			expires_at = CASE WHEN kind = 'dcr' THEN greatest(expires_at, $4) END
		WHERE tenant_id = $1 AND id = $2`, tenantID, ref, now, now.Add(oauth.GrantTTL+oauth.ClientUnusedTTL))
	return err
}

// OAuthEnabled reports the tenant's switch for OAuth clients (on unless an
// admin switched it off).
func (tx *Tx) OAuthEnabled(ctx context.Context) (_ bool, err error) {
	defer wrap(&err, "postgres.OAuthEnabled")
	tenantID := tx.tenantID
	var on bool
	err = tx.q.QueryRow(ctx, `SELECT coalesce((SELECT (settings #>> '{oauth,enabled}')::boolean FROM tenant_settings WHERE tenant_id = $1), true)`, tenantID).Scan(&on)
	return on, err
}

// MCPEnabled reports whether the tenant has MCP switched on (off by
// default, as the auth function reads it).
func (tx *Tx) MCPEnabled(ctx context.Context) (_ bool, err error) {
	defer wrap(&err, "postgres.MCPEnabled")
	var on bool
	err = tx.q.QueryRow(ctx, `SELECT coalesce((SELECT (settings #>> '{mcp,enabled}')::boolean FROM tenant_settings WHERE tenant_id = $1), false)`, tx.tenantID).Scan(&on)
	return on, err
}

// SetOAuthEnabled switches OAuth clients for a tenant with its audit event.
// Switching off makes the access tokens of every grant answer 401 at once
// (the auth function reads the switch); grants are kept, so switching back
// on restores them.
func (tx *Tx) SetOAuthEnabled(ctx context.Context, enabled bool, actor Actor) (_ bool, err error) {
	defer wrap(&err, "postgres.SetOAuthEnabled")
	tenantID := tx.tenantID
	before, err := tx.OAuthEnabled(ctx)
	if err != nil {
		return false, err
	}
	if _, err := tx.q.Exec(ctx, `INSERT INTO tenant_settings (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO NOTHING`, tenantID); err != nil {
		return false, err
	}
	if _, err := tx.q.Exec(ctx, `UPDATE tenant_settings
		SET settings = jsonb_set(settings, '{oauth}', coalesce(settings->'oauth', '{}') || jsonb_build_object('enabled', $2::boolean)),
		    updated_at = now()
		WHERE tenant_id = $1`, tenantID, enabled); err != nil {
		return false, err
	}
	if before == enabled {
		return false, nil
	}
	return true, tx.insertAudit(ctx, actor, "oauth.switched", "", map[string]any{"enabled": enabled})
}

// NewCode is an authorization code to store: the person, the client and
// what the client asked for.
type NewCode struct {
	Hash        []byte
	UserID      string
	ClientRef   string
	RedirectURI string
	Challenge   string
	Resource    string
	IdPID       string
	IdPGroups   []string
}

// CreateOAuthCode stores an authorization code (hash only), valid for
// oauth.CodeTTL.
func (tx *Tx) CreateOAuthCode(ctx context.Context, nc NewCode, now time.Time) (err error) {
	defer wrap(&err, "postgres.CreateOAuthCode")
	tenantID := tx.tenantID
	_, err = tx.q.Exec(ctx, `INSERT INTO oauth_codes (tenant_id, code_hash, user_id, client_ref, redirect_uri, code_challenge, resource, idp_id, idp_groups, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, '')::uuid, $9, $10, $11)`,
		tenantID, nc.Hash, nc.UserID, nc.ClientRef, nc.RedirectURI, nc.Challenge, nc.Resource, nc.IdPID, nc.IdPGroups, now, now.Add(oauth.CodeTTL))
	if err == nil {
		// Old codes are of no use; remove them opportunistically.
		_, err = tx.q.Exec(ctx, `DELETE FROM oauth_codes WHERE tenant_id = $1 AND expires_at < $2::timestamptz - interval '1 day'`, tenantID, now)
	}
	return err
}

// Issued is what the token endpoint hands out. The secrets were generated
// by the caller; only their hashes were stored.
type Issued struct {
	GrantID   string
	ExpiresIn time.Duration
}

// CodeExchange is an authorization_code request at the token endpoint.
type CodeExchange struct {
	CodeHash    []byte
	ClientID    string
	RedirectURI string
	Verifier    string
	Resource    string // optional at the token endpoint; must match when given
	Access      string // the clt_ access token to issue
	Refresh     string // the clr_ refresh token to issue
	Now         time.Time
}

// ExchangeOAuthCode redeems an authorization code: single use (the code is
// burnt at its first presentation, whatever the outcome), PKCE S256, the
// same client and redirect URI, then a grant, its access token and its
// refresh token, audited in this transaction. A second presentation of a
// redeemed code revokes the grant the first one created (RFC 6749 §4.1.2).
//
// An *oauth.Error is the client's fault and leaves the transaction to be
// committed (the burnt code, a revocation); an error is the server's.
func (tx *Tx) ExchangeOAuthCode(ctx context.Context, ex CodeExchange) (_ Issued, _ *oauth.Error, err error) {
	defer wrap(&err, "postgres.ExchangeOAuthCode")
	tenantID := tx.tenantID
	var (
		id, userID, clientRef, redirectURI, challenge, resource, clientID, clientName string
		idpID, grantID                                                                *string
		groups                                                                        []string
		expires                                                                       time.Time
		used                                                                          *time.Time
	)
	err = tx.q.QueryRow(ctx, `SELECT c.id::text, c.user_id::text, c.client_ref::text, c.redirect_uri, c.code_challenge, c.resource,
			c.idp_id::text, c.idp_groups, c.expires_at, c.used_at, c.grant_id::text, cl.client_id, cl.name
		FROM oauth_codes c JOIN oauth_clients cl ON cl.tenant_id = c.tenant_id AND cl.id = c.client_ref
		WHERE c.tenant_id = $1 AND c.code_hash = $2 FOR UPDATE OF c`, tenantID, ex.CodeHash).
		Scan(&id, &userID, &clientRef, &redirectURI, &challenge, &resource, &idpID, &groups, &expires, &used, &grantID, &clientID, &clientName)
	if errors.Is(err, pgx.ErrNoRows) {
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the authorization code is unknown"), nil
	}
	if err != nil {
		return Issued{}, nil, err
	}
	if used != nil {
		if grantID != nil {
			if err := tx.revokeGrant(ctx, *grantID, "code_reused"); err != nil {
				return Issued{}, nil, err
			}
			if err := tx.insertAudit(ctx, Actor{Label: "oauth client " + codelotse.Clip(clientID, 200)}, "oauth.code_reused", *grantID,
				map[string]any{"client": clientName}); err != nil {
				return Issued{}, nil, err
			}
		}
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the authorization code was already used; the tokens it issued are revoked"), nil
	}
	if _, err := tx.q.Exec(ctx, `UPDATE oauth_codes SET used_at = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, id, ex.Now); err != nil {
		return Issued{}, nil, err
	}
	switch {
	case !ex.Now.Before(expires):
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the authorization code expired"), nil
	case ex.ClientID != clientID:
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the authorization code was issued to another client"), nil
	case ex.RedirectURI != redirectURI:
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "redirect_uri differs from the authorization request's"), nil
	case ex.Verifier == "":
		return Issued{}, oauth.Errorf(oauth.ErrInvalidRequest, "code_verifier is required (PKCE)"), nil
	case !oauth.VerifyPKCE(ex.Verifier, challenge):
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "code_verifier does not match the code_challenge"), nil
	case ex.Resource != "" && ex.Resource != resource:
		return Issued{}, oauth.Errorf(oauth.ErrInvalidTarget, "resource differs from the authorization request's"), nil
	}
	if on, err := tx.OAuthEnabled(ctx); err != nil || !on {
		if err != nil {
			return Issued{}, nil, err
		}
		// invalid_grant, not access_denied: the token endpoint's errors are
		// RFC 6749 §5.2's, and the grant is what no longer holds.
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "this organisation has switched OAuth clients off"), nil
	}
	// A token issued while MCP is off would be refused by every request;
	// the client would believe it is connected.
	if on, err := tx.MCPEnabled(ctx); err != nil || !on {
		if err != nil {
			return Issued{}, nil, err
		}
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "this organisation has switched MCP off"), nil
	}
	var email string
	err = tx.q.QueryRow(ctx, `SELECT email FROM users WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE`, tenantID, userID).Scan(&email)
	if errors.Is(err, pgx.ErrNoRows) {
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the person who authorized the client no longer exists"), nil
	}
	if err != nil {
		return Issued{}, nil, err
	}
	n, err := tx.activeAccess(ctx, userID, ex.Now)
	if err != nil {
		return Issued{}, nil, err
	}
	if n >= tokens.MaxActive {
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the person already has the most active tokens and connected clients allowed; they must revoke one first"), nil
	}
	name := clientName
	if name == "" {
		name = oauth.Client{ClientID: clientID}.DisplayName()
	}
	var gid string
	if err := tx.q.QueryRow(ctx, `INSERT INTO oauth_grants (tenant_id, user_id, client_ref, client_name, resource, idp_id, idp_groups, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id::text`,
		tenantID, userID, clientRef, name, resource, idpID, groups, ex.Now, ex.Now.Add(oauth.GrantTTL)).Scan(&gid); err != nil {
		return Issued{}, nil, err
	}
	if _, err := tx.q.Exec(ctx, `UPDATE oauth_codes SET grant_id = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, id, gid); err != nil {
		return Issued{}, nil, err
	}
	g := grantRow{id: gid, userID: userID, name: name, resource: resource, idpID: idpID, groups: groups, expires: ex.Now.Add(oauth.GrantTTL)}
	in, err := tx.issue(ctx, g, ex.Access, ex.Refresh, ex.Now)
	if err != nil {
		return Issued{}, nil, err
	}
	if err := tx.touchClient(ctx, clientRef, ex.Now); err != nil {
		return Issued{}, nil, err
	}
	return in, nil, tx.insertAudit(ctx, Actor{UserID: userID, Label: email}, "oauth.granted", gid,
		map[string]any{"client": name, "client_id": codelotse.Clip(clientID, 200), "user": email, "expires_at": g.expires})
}

type grantRow struct {
	id, userID, name, resource string
	idpID                      *string
	groups                     []string
	expires                    time.Time
}

// issue stores an access token (1 hour, never beyond the grant) and a
// refresh token (until the grant ends) for grant g.
func (tx *Tx) issue(ctx context.Context, g grantRow, access, refresh string, now time.Time) (Issued, error) {
	tenantID := tx.tenantID
	if !tokens.Valid(access) || !oauth.ValidRefreshToken(refresh) {
		return Issued{}, codelotse.Errorf(codelotse.Internal, "refusing to store a malformed token")
	}
	exp := now.Add(oauth.AccessTTL)
	if g.expires.Before(exp) {
		exp = g.expires
	}
	name := []rune(g.name)
	if len(name) > tokens.MaxNameRune {
		name = name[:tokens.MaxNameRune]
	}
	if _, err := tx.q.Exec(ctx, `INSERT INTO mcp_tokens (tenant_id, user_id, name, token_hash, last4, scope, created_at, expires_at, idp_id, idp_groups, oauth_grant_id, audience)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		tenantID, g.userID, string(name), tokens.Hash(access), tokens.Last4(access), codelotse.ScopeMCPRead, now, exp, g.idpID, g.groups, g.id, g.resource); err != nil {
		return Issued{}, err
	}
	if _, err := tx.q.Exec(ctx, `INSERT INTO oauth_refresh_tokens (tenant_id, grant_id, token_hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		tenantID, g.id, oauth.Hash(refresh), now, g.expires); err != nil {
		return Issued{}, err
	}
	// Expired access tokens of the grant are of no use; keep the table small.
	if _, err := tx.q.Exec(ctx, `DELETE FROM mcp_tokens WHERE tenant_id = $1 AND oauth_grant_id = $2 AND expires_at < $3::timestamptz - interval '1 day'`, tenantID, g.id, now); err != nil {
		return Issued{}, err
	}
	return Issued{GrantID: g.id, ExpiresIn: exp.Sub(now)}, nil
}

// RefreshExchange is a refresh_token request at the token endpoint.
type RefreshExchange struct {
	TokenHash []byte
	ClientID  string
	Resource  string
	Access    string
	Refresh   string
	Now       time.Time
}

// RefreshOAuthToken rotates a refresh token: the presented one is used up
// and a new access and refresh token are issued. Presenting a used refresh
// token again means it was copied: the whole grant is revoked and the
// detection audited, in this transaction.
func (tx *Tx) RefreshOAuthToken(ctx context.Context, r RefreshExchange) (_ Issued, _ *oauth.Error, err error) {
	defer wrap(&err, "postgres.RefreshOAuthToken")
	tenantID := tx.tenantID
	var (
		rtID, clientID, clientRef string
		g                         grantRow
		rtExpires                 time.Time
		used, grantRevoked        *time.Time
	)
	err = tx.q.QueryRow(ctx, `SELECT rt.id::text, rt.expires_at, rt.used_at, g.id::text, g.user_id::text, g.client_name, g.resource,
			g.idp_id::text, g.idp_groups, g.expires_at, g.revoked_at, cl.client_id, cl.id::text
		FROM oauth_refresh_tokens rt
		JOIN oauth_grants g ON g.tenant_id = rt.tenant_id AND g.id = rt.grant_id
		JOIN oauth_clients cl ON cl.tenant_id = g.tenant_id AND cl.id = g.client_ref
		WHERE rt.tenant_id = $1 AND rt.token_hash = $2 FOR UPDATE OF rt, g`, tenantID, r.TokenHash).
		Scan(&rtID, &rtExpires, &used, &g.id, &g.userID, &g.name, &g.resource, &g.idpID, &g.groups, &g.expires, &grantRevoked, &clientID, &clientRef)
	if errors.Is(err, pgx.ErrNoRows) {
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the refresh token is unknown"), nil
	}
	if err != nil {
		return Issued{}, nil, err
	}
	switch {
	case grantRevoked != nil:
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the grant was revoked"), nil
	case r.ClientID != clientID:
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the refresh token was issued to another client"), nil
	case used != nil:
		if err := tx.revokeGrant(ctx, g.id, "refresh_reused"); err != nil {
			return Issued{}, nil, err
		}
		if err := tx.insertAudit(ctx, Actor{Label: "oauth client " + codelotse.Clip(clientID, 200)}, "oauth.refresh_reused", g.id,
			map[string]any{"client": g.name}); err != nil {
			return Issued{}, nil, err
		}
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the refresh token was already used; the grant is revoked"), nil
	case !r.Now.Before(rtExpires) || !r.Now.Before(g.expires):
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the grant expired; authorize the client again"), nil
	case r.Resource != "" && r.Resource != g.resource:
		return Issued{}, oauth.Errorf(oauth.ErrInvalidTarget, "resource differs from the grant's"), nil
	}
	if on, err := tx.OAuthEnabled(ctx); err != nil || !on {
		if err != nil {
			return Issued{}, nil, err
		}
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "this organisation has switched OAuth clients off"), nil
	}
	var active bool
	if err := tx.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL)`, tenantID, g.userID).Scan(&active); err != nil {
		return Issued{}, nil, err
	}
	if !active {
		return Issued{}, oauth.Errorf(oauth.ErrInvalidGrant, "the person who authorized the client no longer exists"), nil
	}
	if _, err := tx.q.Exec(ctx, `UPDATE oauth_refresh_tokens SET used_at = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, rtID, r.Now); err != nil {
		return Issued{}, nil, err
	}
	in, err := tx.issue(ctx, g, r.Access, r.Refresh, r.Now)
	if err != nil {
		return Issued{}, nil, err
	}
	return in, nil, tx.touchClient(ctx, clientRef, r.Now)
}

// revokeGrant revokes a grant with its access tokens; its refresh tokens
// die with it (refresh checks the grant).
func (tx *Tx) revokeGrant(ctx context.Context, grantID, reason string) error {
	tenantID := tx.tenantID
	if _, err := tx.q.Exec(ctx, `UPDATE oauth_grants SET revoked_at = now(), revoked_reason = $3
		WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL`, tenantID, grantID, reason); err != nil {
		return err
	}
	_, err := tx.q.Exec(ctx, `UPDATE mcp_tokens SET revoked_at = now()
		WHERE tenant_id = $1 AND oauth_grant_id = $2 AND revoked_at IS NULL`, tenantID, grantID)
	return err
}

// RevokeGrant revokes a grant of the tenant (the MCP access page, the admin
// page, cltctl). When userID is set only that person's grant can be revoked.
// Revoking a revoked grant is not an error and writes no second event.
func (tx *Tx) RevokeGrant(ctx context.Context, grantID, userID string, actor Actor) (err error) {
	defer wrap(&err, "postgres.RevokeGrant")
	tenantID := tx.tenantID
	var revoked *time.Time
	var name string
	err = tx.q.QueryRow(ctx, `SELECT revoked_at, client_name FROM oauth_grants
		WHERE tenant_id = $1 AND id::text = $2 AND ($3 = '' OR user_id::text = $3) FOR UPDATE`, tenantID, grantID, userID).Scan(&revoked, &name)
	if errors.Is(err, pgx.ErrNoRows) {
		return codelotse.Errorf(codelotse.NotFound, "no connected client with id %s", grantID)
	}
	if err != nil || revoked != nil {
		return err
	}
	if err := tx.revokeGrant(ctx, grantID, "revoked"); err != nil {
		return err
	}
	return tx.insertAudit(ctx, actor, "oauth.revoked", grantID, map[string]any{"client": name})
}

// RevokeByToken is RFC 7009 revocation: a refresh token or an OAuth access
// token of clientID revokes its whole grant. Unknown tokens, personal
// access tokens and other clients' tokens change nothing (the endpoint
// answers 200 all the same, so it reveals nothing).
func (tx *Tx) RevokeByToken(ctx context.Context, hash []byte, clientID string) (err error) {
	defer wrap(&err, "postgres.RevokeByToken")
	tenantID := tx.tenantID
	var grantID, name string
	err = tx.q.QueryRow(ctx, `SELECT g.id::text, g.client_name FROM oauth_grants g
		JOIN oauth_clients cl ON cl.tenant_id = g.tenant_id AND cl.id = g.client_ref
		WHERE g.tenant_id = $1 AND cl.client_id = $3 AND g.revoked_at IS NULL AND (
			g.id IN (SELECT grant_id FROM oauth_refresh_tokens WHERE tenant_id = $1 AND token_hash = $2)
			OR g.id IN (SELECT oauth_grant_id FROM mcp_tokens WHERE tenant_id = $1 AND token_hash = $2))
		FOR UPDATE OF g`, tenantID, hash, clientID).Scan(&grantID, &name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := tx.revokeGrant(ctx, grantID, "revoked_by_client"); err != nil {
		return err
	}
	return tx.insertAudit(ctx, Actor{Label: "oauth client " + codelotse.Clip(clientID, 200)}, "oauth.revoked", grantID, map[string]any{"client": name})
}

// Grant is an OAuth grant as the pages list it.
type Grant struct {
	ID         string
	UserID     string
	UserEmail  string
	ClientName string
	ClientID   string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
}

// State is active, revoked or expired.
func (g Grant) State(now time.Time) string {
	switch {
	case g.RevokedAt != nil:
		return "revoked"
	case !now.Before(g.ExpiresAt):
		return "expired"
	}
	return "active"
}

// ListGrants lists the grants of a tenant, or of one person, newest first;
// last used is the latest use of any of the grant's access tokens.
func (tx *Tx) ListGrants(ctx context.Context, userID string) (_ []Grant, err error) {
	defer wrap(&err, "postgres.ListGrants")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT g.id::text, g.user_id::text, u.email, g.client_name, cl.client_id, g.created_at, g.expires_at, g.revoked_at,
			(SELECT max(t.last_used_at) FROM mcp_tokens t WHERE t.tenant_id = g.tenant_id AND t.oauth_grant_id = g.id)
		FROM oauth_grants g
		JOIN users u ON u.tenant_id = g.tenant_id AND u.id = g.user_id
		JOIN oauth_clients cl ON cl.tenant_id = g.tenant_id AND cl.id = g.client_ref
		WHERE g.tenant_id = $1 AND ($2 = '' OR g.user_id::text = $2)
		ORDER BY g.created_at DESC, g.id`, tenantID, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Grant, error) {
		var g Grant
		err := r.Scan(&g.ID, &g.UserID, &g.UserEmail, &g.ClientName, &g.ClientID, &g.CreatedAt, &g.ExpiresAt, &g.RevokedAt, &g.LastUsedAt)
		return g, err
	})
}

// ActiveAccess is how many of the 10 active entries a person holds.
func (tx *Tx) ActiveAccess(ctx context.Context, userID string, now time.Time) (_ int, err error) {
	defer wrap(&err, "postgres.ActiveAccess")
	return tx.activeAccess(ctx, userID, now)
}
