package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// LoginState is a one-time sign-in state or link.
type LoginState struct {
	ID       string
	Kind     string // github, oidc, break-glass, dev
	UserID   string
	IdPID    string
	Verifier string
	Nonce    string
	ReturnTo string
	// BrowserHash binds a sign-in to the browser that started it.
	BrowserHash []byte
}

// CreateLoginState stores a state whose secret hashes to hash.
func (tx *Tx) CreateLoginState(ctx context.Context, hash []byte, st LoginState, ttl time.Duration) (err error) {
	defer wrap(&err, "postgres.CreateLoginState")
	tenantID := tx.tenantID
	_, err = tx.q.Exec(ctx, `INSERT INTO login_states (tenant_id, secret_hash, kind, user_id, idp_id, verifier, nonce, return_to, browser_hash, expires_at)
		VALUES ($1, $2, $3, nullif($4, '')::uuid, nullif($5, '')::uuid, $6, $7, $8, $9, now() + $10::interval)`,
		tenantID, hash, st.Kind, st.UserID, st.IdPID, st.Verifier, st.Nonce, st.ReturnTo, st.BrowserHash, ttl.String())
	return err
}

// ConsumeLoginState marks a state used and returns it; unknown, expired and
// already used states are one NotFound error.
func (tx *Tx) ConsumeLoginState(ctx context.Context, hash []byte) (_ LoginState, err error) {
	defer wrap(&err, "postgres.ConsumeLoginState")
	tenantID := tx.tenantID
	var st LoginState
	var uid, idp *string
	err = tx.q.QueryRow(ctx, `UPDATE login_states SET used_at = now()
		WHERE tenant_id = $1 AND secret_hash = $2 AND used_at IS NULL AND expires_at > now()
		RETURNING id::text, kind, user_id::text, idp_id::text, verifier, nonce, return_to, browser_hash`, tenantID, hash).
		Scan(&st.ID, &st.Kind, &uid, &idp, &st.Verifier, &st.Nonce, &st.ReturnTo, &st.BrowserHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, codelotse.Errorf(codelotse.NotFound, "this sign-in link or attempt is unknown, expired or already used")
	}
	if uid != nil {
		st.UserID = *uid
	}
	if idp != nil {
		st.IdPID = *idp
	}
	// Old states are of no use; remove them opportunistically.
	if err == nil {
		_, err = tx.q.Exec(ctx, `DELETE FROM login_states WHERE tenant_id = $1 AND expires_at < now() - interval '1 day'`, tenantID)
	}
	return st, err
}

// WebSession is a signed-in browser session.
type WebSession struct {
	ID         string
	TenantID   string
	UserID     string
	Email      string
	Name       string
	BreakGlass bool
	IdPID      string
	IdPGroups  []string
	ExpiresAt  time.Time
	// Grant inputs, as for tokens.
	Membership *codelotse.Membership
	RepoIDs    []int64
	Mappings   []codelotse.GroupMapping
}

// CreateWebSession stores a session whose cookie secret hashes to hash.
func (tx *Tx) CreateWebSession(ctx context.Context, hash []byte, userID string, breakGlass bool, idpID string, groups []string, ttl time.Duration) (_ string, err error) {
	defer wrap(&err, "postgres.CreateWebSession")
	tenantID := tx.tenantID
	var id string
	err = tx.q.QueryRow(ctx, `INSERT INTO web_sessions (tenant_id, session_hash, user_id, break_glass, idp_id, idp_groups, expires_at)
		VALUES ($1, $2, $3, $4, nullif($5, '')::uuid, $6, now() + $7::interval) RETURNING id::text`,
		tenantID, hash, userID, breakGlass, idpID, groups, ttl.String()).Scan(&id)
	return id, err
}

// WebSessionByHash reads an active session of the tenant with its user and
// grant inputs.
func (t TenantDB) WebSessionByHash(ctx context.Context, hash []byte) (_ WebSession, _ bool, err error) {
	defer wrap(&err, "postgres.WebSessionByHash")
	db, tenantID := t.db, t.tenantID
	var s WebSession
	found := false
	err = db.InTenant(ctx, tenantID, func(tx *Tx) error {
		var idp *string
		var role, source *string
		var since *time.Time
		err := tx.q.QueryRow(ctx, `SELECT s.id::text, s.user_id::text, u.email, u.name, s.break_glass, s.idp_id::text, coalesce(s.idp_groups, '{}'), s.expires_at,
				m.role, m.source, m.refreshed_at,
				coalesce((SELECT array_agg(repository_id) FROM repo_memberships rm WHERE rm.tenant_id = s.tenant_id AND rm.user_id = s.user_id), '{}')
			FROM web_sessions s
			JOIN users u ON u.tenant_id = s.tenant_id AND u.id = s.user_id AND u.deleted_at IS NULL
			LEFT JOIN tenant_memberships m ON m.tenant_id = s.tenant_id AND m.user_id = s.user_id
			WHERE s.tenant_id = $1 AND s.session_hash = $2 AND s.revoked_at IS NULL AND s.expires_at > now()`, tenantID, hash).
			Scan(&s.ID, &s.UserID, &s.Email, &s.Name, &s.BreakGlass, &idp, &s.IdPGroups, &s.ExpiresAt, &role, &source, &since, &s.RepoIDs)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		s.TenantID = tenantID
		if role != nil {
			s.Membership = &codelotse.Membership{Role: codelotse.Role(*role), Source: *source, RefreshedAt: *since}
		}
		if idp != nil {
			s.IdPID = *idp
			rows, err := tx.q.Query(ctx, `SELECT m.group_name, m.role, m.repository_id FROM oidc_group_mappings m
				JOIN identity_providers i ON i.tenant_id = m.tenant_id AND i.id = m.idp_id AND i.enabled
				WHERE m.tenant_id = $1 AND m.idp_id = $2 AND m.group_name = ANY($3)`, tenantID, *idp, s.IdPGroups)
			if err != nil {
				return err
			}
			s.Mappings, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (codelotse.GroupMapping, error) {
				var m codelotse.GroupMapping
				var role string
				err := r.Scan(&m.Group, &role, &m.RepositoryID)
				m.Role = codelotse.Role(role)
				return m, err
			})
			return err
		}
		return nil
	})
	return s, found, err
}

// RevokeWebSession ends a session.
func (tx *Tx) RevokeWebSession(ctx context.Context, hash []byte) (err error) {
	defer wrap(&err, "postgres.RevokeWebSession")
	tenantID := tx.tenantID
	_, err = tx.q.Exec(ctx, `UPDATE web_sessions SET revoked_at = now() WHERE tenant_id = $1 AND session_hash = $2 AND revoked_at IS NULL`, tenantID, hash)
	return err
}

// PurgeExpiredLoginStates deletes the sign-in states of every tenant that
// have expired (used or not) and returns how many went. It runs through
// the auth.maintenance function, which can reach expired rows only.
func (db *DB) PurgeExpiredLoginStates(ctx context.Context) (_ int64, err error) {
	defer wrap(&err, "postgres.PurgeExpiredLoginStates")
	var n int64
	if err := db.Pool.QueryRow(ctx, "SELECT purge_expired_login_states()").Scan(&n); err != nil {
		return 0, codelotse.Wrap(codelotse.Unavailable, err, "purging expired login states")
	}
	return n, nil
}
