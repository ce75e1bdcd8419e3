package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// UserByEmail finds a (not deleted) user of the tenant by email, case-insensitively.
func (tx *Tx) UserByEmail(ctx context.Context, email string) (_ codelotse.User, err error) {
	defer wrap(&err, "postgres.UserByEmail")
	tenantID := tx.tenantID
	var u codelotse.User
	err = tx.q.QueryRow(ctx, `SELECT id::text, tenant_id::text, email, name, created_at FROM users
		WHERE tenant_id = $1 AND lower(email) = lower($2) AND deleted_at IS NULL`, tenantID, strings.TrimSpace(email)).
		Scan(&u.ID, &u.TenantID, &u.Email, &u.Name, &u.CreatedAt)
	return u, notFound(err, "no user with email "+email+" in this tenant")
}

// UpsertLocalUser creates the user if needed (or revives a deleted one) and
// stamps a local tenant membership with role, refreshed now. This is the
// operator's way to add people without GitHub (cltctl user add); the
// membership behaves like a GitHub cache refreshed at this moment.
func (tx *Tx) UpsertLocalUser(ctx context.Context, email, name string, role codelotse.Role, now time.Time) (_ codelotse.User, err error) {
	defer wrap(&err, "postgres.UpsertLocalUser")
	tenantID := tx.tenantID
	var u codelotse.User
	email = strings.TrimSpace(email)
	err = tx.q.QueryRow(ctx, `INSERT INTO users (tenant_id, email, name) VALUES ($1, $2, $3)
		ON CONFLICT (tenant_id, lower(email)) DO UPDATE SET deleted_at = NULL,
			name = CASE WHEN EXCLUDED.name = '' THEN users.name ELSE EXCLUDED.name END
		RETURNING id::text, tenant_id::text, email, name, created_at`, tenantID, email, name).
		Scan(&u.ID, &u.TenantID, &u.Email, &u.Name, &u.CreatedAt)
	if isCheckViolation(err) {
		return u, codelotse.Errorf(codelotse.Invalid, "%q is not an email address", email)
	}
	if err != nil {
		return u, err
	}
	if err := tx.RefreshMembership(ctx, u.ID, role, "local", now); err != nil {
		return u, err
	}
	return u, nil
}

// RefreshMembership writes the cached tenant membership of a user, stamped now.
func (tx *Tx) RefreshMembership(ctx context.Context, userID string, role codelotse.Role, source string, now time.Time) (err error) {
	defer wrap(&err, "postgres.RefreshMembership")
	tenantID := tx.tenantID
	_, err = tx.q.Exec(ctx, `INSERT INTO tenant_memberships (tenant_id, user_id, role, source, refreshed_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET role = EXCLUDED.role, source = EXCLUDED.source, refreshed_at = EXCLUDED.refreshed_at`,
		tenantID, userID, string(role), source, now)
	return err
}

// DeleteUser marks a user deleted and, in the same transaction, revokes
// every token and web session of theirs, drops their unused sign-in links
// and their cached memberships. A later re-add of the same email (cltctl
// user add, a GitHub or OIDC sign-in) revives the user row but none of
// these: old tokens and sessions stay revoked, access must be earned anew.
// The rows stay for the audit log.
func (tx *Tx) DeleteUser(ctx context.Context, email string, actor Actor) (err error) {
	defer wrap(&err, "postgres.DeleteUser")
	tenantID := tx.tenantID
	var userID string
	err = tx.q.QueryRow(ctx, `UPDATE users SET deleted_at = now()
		WHERE tenant_id = $1 AND lower(email) = lower($2) AND deleted_at IS NULL
		RETURNING id::text`, tenantID, strings.TrimSpace(email)).Scan(&userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return codelotse.Errorf(codelotse.NotFound, "no user with email %s in this tenant", email)
	}
	if err != nil {
		return err
	}
	toks, err := tx.q.Exec(ctx, `UPDATE mcp_tokens SET revoked_at = now()
		WHERE tenant_id = $1 AND user_id = $2 AND revoked_at IS NULL`, tenantID, userID)
	if err != nil {
		return err
	}
	sess, err := tx.q.Exec(ctx, `UPDATE web_sessions SET revoked_at = now()
		WHERE tenant_id = $1 AND user_id = $2 AND revoked_at IS NULL`, tenantID, userID)
	if err != nil {
		return err
	}
	for _, q := range []string{
		`DELETE FROM login_states WHERE tenant_id = $1 AND user_id = $2`,
		`DELETE FROM repo_memberships WHERE tenant_id = $1 AND user_id = $2`,
		`DELETE FROM tenant_memberships WHERE tenant_id = $1 AND user_id = $2`,
	} {
		if _, err := tx.q.Exec(ctx, q, tenantID, userID); err != nil {
			return err
		}
	}
	return tx.insertAudit(ctx, actor, "user.deleted", email,
		map[string]any{"tokens_revoked": toks.RowsAffected(), "sessions_revoked": sess.RowsAffected()})
}

// UpsertGitHubUser finds the tenant's user with this GitHub id (or, the
// first time, with this email) and updates their profile, or creates one.
func (tx *Tx) UpsertGitHubUser(ctx context.Context, githubID int64, login, name, email string) (_ codelotse.User, err error) {
	defer wrap(&err, "postgres.UpsertGitHubUser")
	tenantID := tx.tenantID
	var u codelotse.User
	err = tx.q.QueryRow(ctx, `UPDATE users SET github_login = $3, name = CASE WHEN $4 = '' THEN name ELSE $4 END, deleted_at = NULL
		WHERE tenant_id = $1 AND (github_user_id = $2 OR (github_user_id IS NULL AND lower(email) = lower($5)))
		RETURNING id::text, tenant_id::text, email, name, created_at`, tenantID, githubID, login, name, email).
		Scan(&u.ID, &u.TenantID, &u.Email, &u.Name, &u.CreatedAt)
	if err == nil {
		_, err = tx.q.Exec(ctx, `UPDATE users SET github_user_id = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, u.ID, githubID)
		return u, err
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return u, err
	}
	err = tx.q.QueryRow(ctx, `INSERT INTO users (tenant_id, email, name, github_user_id, github_login) VALUES ($1, $2, $3, $4, $5)
		RETURNING id::text, tenant_id::text, email, name, created_at`, tenantID, email, name, githubID, login).
		Scan(&u.ID, &u.TenantID, &u.Email, &u.Name, &u.CreatedAt)
	return u, err
}

// UpsertOIDCUser finds the tenant's user with this provider subject and
// updates them, or creates one. An existing user is linked by email only
// when the provider verified the email and the user is not bound to another
// identity (a provider subject or a GitHub account): an unverified email
// claim must not take over someone else's account.
func (tx *Tx) UpsertOIDCUser(ctx context.Context, idpID, subject, email, name string, emailVerified bool) (_ codelotse.User, err error) {
	defer wrap(&err, "postgres.UpsertOIDCUser")
	tenantID := tx.tenantID
	var u codelotse.User
	err = tx.q.QueryRow(ctx, `UPDATE users SET idp_id = $2, idp_subject = $3, name = CASE WHEN $5 = '' THEN name ELSE $5 END, deleted_at = NULL
		WHERE tenant_id = $1 AND ((idp_id = $2 AND idp_subject = $3)
			OR ($6 AND idp_subject IS NULL AND github_user_id IS NULL AND lower(email) = lower($4)))
		RETURNING id::text, tenant_id::text, email, name, created_at`, tenantID, idpID, subject, email, name, emailVerified).
		Scan(&u.ID, &u.TenantID, &u.Email, &u.Name, &u.CreatedAt)
	if err == nil || !errors.Is(err, pgx.ErrNoRows) {
		return u, err
	}
	err = tx.q.QueryRow(ctx, `INSERT INTO users (tenant_id, email, name, idp_id, idp_subject) VALUES ($1, $2, $3, $4, $5)
		RETURNING id::text, tenant_id::text, email, name, created_at`, tenantID, email, name, idpID, subject).
		Scan(&u.ID, &u.TenantID, &u.Email, &u.Name, &u.CreatedAt)
	switch {
	case isCheckViolation(err):
		return u, codelotse.Errorf(codelotse.Invalid, "Your identity provider sent no usable email address.")
	case isUniqueViolation(err, "users_tenant_email"):
		return u, codelotse.Errorf(codelotse.Invalid, "Another account of this organisation uses the email %s, and your identity provider did not verify it for you. Ask an admin.", email)
	}
	return u, err
}

// ReplaceRepoMemberships replaces the user's cached repository memberships
// with repoIDs, stamped now (a GitHub sign-in).
func (tx *Tx) ReplaceRepoMemberships(ctx context.Context, userID string, repoIDs []int64) (err error) {
	defer wrap(&err, "postgres.ReplaceRepoMemberships")
	tenantID := tx.tenantID
	if _, err := tx.q.Exec(ctx, `DELETE FROM repo_memberships WHERE tenant_id = $1 AND user_id = $2 AND NOT (repository_id = ANY($3))`,
		tenantID, userID, repoIDs); err != nil {
		return err
	}
	_, err = tx.q.Exec(ctx, `INSERT INTO repo_memberships (tenant_id, user_id, repository_id, permission, refreshed_at)
		SELECT $1, $2, r, 'read', now() FROM unnest($3::bigint[]) AS r
		ON CONFLICT (tenant_id, user_id, repository_id) DO UPDATE SET refreshed_at = now()`, tenantID, userID, repoIDs)
	return err
}

// MembershipRole is the user's role in the tenant; found is false when the
// user has no membership row.
func (tx *Tx) MembershipRole(ctx context.Context, userID string) (role codelotse.Role, found bool, err error) {
	defer wrap(&err, "postgres.MembershipRole")
	err = tx.q.QueryRow(ctx, `SELECT role FROM tenant_memberships WHERE tenant_id = $1 AND user_id = $2`, tx.tenantID, userID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return role, err == nil, err
}
