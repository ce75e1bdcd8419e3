package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// TenantIDsForOperator lists every tenant's id, oldest first, through the
// administrative SECURITY DEFINER function tenant_ids_for_operator (the
// runtime role may not call it). cltctl tenant list reads each tenant's
// details inside that tenant's transaction.
func (db *DB) TenantIDsForOperator(ctx context.Context) (_ []string, err error) {
	defer wrap(&err, "postgres.TenantIDsForOperator")
	rows, err := db.Pool.Query(ctx, "SELECT id::text FROM tenant_ids_for_operator() AS id")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// TenantCounts are what `cltctl tenant list` shows besides the tenant.
type TenantCounts struct {
	Users, Repositories, ActiveTokens int
}

// CountTenant counts a tenant's live users, repositories and active tokens.
func (tx *Tx) CountTenant(ctx context.Context) (_ TenantCounts, err error) {
	defer wrap(&err, "postgres.CountTenant")
	tenantID := tx.tenantID
	var c TenantCounts
	err = tx.q.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM users WHERE tenant_id = $1 AND deleted_at IS NULL),
			(SELECT count(*) FROM repositories WHERE tenant_id = $1),
			(SELECT count(*) FROM mcp_tokens WHERE tenant_id = $1 AND revoked_at IS NULL AND expires_at > now())`, tenantID).
		Scan(&c.Users, &c.Repositories, &c.ActiveTokens)
	return c, err
}

// Member is a user with their tenant membership, as operators and the
// admin page list them.
type Member struct {
	Email, Name string
	// Role and Source are "" when the user has no tenant membership (an
	// OIDC user's access comes from groups; a break-glass operator has none).
	Role        codelotse.Role
	Source      string // github (cached sign-in), local (cltctl), ""
	RefreshedAt *time.Time
	Identity    string // github, oidc or local: how the user signs in
	Repos       int    // repositories granted directly (repo_memberships)
	CreatedAt   time.Time
}

// ListMembers lists the tenant's live users by email with their membership.
func (tx *Tx) ListMembers(ctx context.Context) (_ []Member, err error) {
	defer wrap(&err, "postgres.ListMembers")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT u.email, u.name, coalesce(m.role, ''), coalesce(m.source, ''), m.refreshed_at,
			CASE WHEN u.github_user_id IS NOT NULL THEN 'github' WHEN u.idp_id IS NOT NULL THEN 'oidc' ELSE 'local' END,
			(SELECT count(*) FROM repo_memberships r WHERE r.tenant_id = u.tenant_id AND r.user_id = u.id),
			u.created_at
		FROM users u
		LEFT JOIN tenant_memberships m ON m.tenant_id = u.tenant_id AND m.user_id = u.id
		WHERE u.tenant_id = $1 AND u.deleted_at IS NULL
		ORDER BY lower(u.email)`, tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		var role string
		err := r.Scan(&m.Email, &m.Name, &role, &m.Source, &m.RefreshedAt, &m.Identity, &m.Repos, &m.CreatedAt)
		m.Role = codelotse.Role(role)
		return m, err
	})
}

// RepoStatus is a repository with its index and review counts, for
// `cltctl repo list`.
type RepoStatus struct {
	codelotse.Repository
	Files, Findings, Granted int
}

// ListRepoStatus lists the tenant's repositories by name with index status.
func (tx *Tx) ListRepoStatus(ctx context.Context) (_ []RepoStatus, err error) {
	defer wrap(&err, "postgres.ListRepoStatus")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT r.id, r.full_name, r.default_branch, r.private, coalesce(r.indexed_commit, ''), r.indexed_at,
			(SELECT count(*) FROM code_files f WHERE f.tenant_id = r.tenant_id AND f.repository_id = r.id),
			(SELECT count(*) FROM findings f WHERE f.tenant_id = r.tenant_id AND f.repository_id = r.id),
			(SELECT count(*) FROM repo_memberships m WHERE m.tenant_id = r.tenant_id AND m.repository_id = r.id)
		FROM repositories r WHERE r.tenant_id = $1 ORDER BY lower(r.full_name), r.id`, tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (RepoStatus, error) {
		var r RepoStatus
		err := row.Scan(&r.ID, &r.FullName, &r.DefaultBranch, &r.Private, &r.IndexedCommit, &r.IndexedAt, &r.Files, &r.Findings, &r.Granted)
		return r, err
	})
}
