package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// NewRepository is what AddRepository needs.
type NewRepository struct {
	FullName      string
	DefaultBranch string
	Private       bool
	URL           string
}

// AddRepository registers a repository (or updates the existing one with
// the same full name) and returns it.
func (tx *Tx) AddRepository(ctx context.Context, nr NewRepository) (_ codelotse.Repository, err error) {
	defer wrap(&err, "postgres.AddRepository")
	tenantID := tx.tenantID
	if nr.DefaultBranch == "" {
		nr.DefaultBranch = "main"
	}
	if nr.URL == "" {
		nr.URL = "https://github.com/" + nr.FullName
	}
	var r codelotse.Repository
	err = tx.q.QueryRow(ctx, `INSERT INTO repositories (tenant_id, full_name, default_branch, private, url)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant_id, lower(full_name)) DO UPDATE
			SET default_branch = EXCLUDED.default_branch, private = EXCLUDED.private, url = EXCLUDED.url
		RETURNING id, full_name, default_branch, private, url`,
		tenantID, nr.FullName, nr.DefaultBranch, nr.Private, nr.URL).
		Scan(&r.ID, &r.FullName, &r.DefaultBranch, &r.Private, &r.URL)
	if isCheckViolation(err) {
		return r, codelotse.Errorf(codelotse.Invalid, "repository must be OWNER/NAME, not %q", nr.FullName)
	}
	r.TenantID = tenantID
	return r, err
}

// RepositoryByName finds a repository of the tenant by full name.
func (tx *Tx) RepositoryByName(ctx context.Context, fullName string) (_ codelotse.Repository, err error) {
	defer wrap(&err, "postgres.RepositoryByName")
	tenantID := tx.tenantID
	var r codelotse.Repository
	err = tx.q.QueryRow(ctx, `SELECT id, full_name, default_branch, private, url FROM repositories
		WHERE tenant_id = $1 AND name_key = lower($2)`, tenantID, fullName).
		Scan(&r.ID, &r.FullName, &r.DefaultBranch, &r.Private, &r.URL)
	r.TenantID = tenantID
	return r, notFound(err, "no repository "+fullName+" in this tenant")
}

// GrantRepository records that a user can view a repository (the cache a
// GitHub sign-in writes; cltctl repo grant writes it by hand).
func (tx *Tx) GrantRepository(ctx context.Context, userID string, repoID int64) (err error) {
	defer wrap(&err, "postgres.GrantRepository")
	tenantID := tx.tenantID
	_, err = tx.q.Exec(ctx, `INSERT INTO repo_memberships (tenant_id, user_id, repository_id, permission, refreshed_at)
		VALUES ($1, $2, $3, 'read', now())
		ON CONFLICT (tenant_id, user_id, repository_id) DO UPDATE SET refreshed_at = now()`, tenantID, userID, repoID)
	return err
}

// RepoFilter limits a repository query to what a principal may view.
type RepoFilter struct {
	// All is true for tenant admins, who see every repository.
	All bool
	// IDs are the viewable repositories otherwise.
	IDs []int64
}

// ListRepositories lists viewable repositories whose full name contains
// query (case-insensitive), ordered by lower-cased full name then id,
// starting after the repository afterID (0: from the start), at most limit
// rows.
func (t TenantDB) ListRepositories(ctx context.Context, f RepoFilter, query string, afterID int64, limit int) (_ []codelotse.Repository, err error) {
	defer wrap(&err, "postgres.ListRepositories")
	db, tenantID := t.db, t.tenantID
	grants, args, o, err := t.grantWhere(ctx, f, "r.id", tenantID, limit)
	if err != nil {
		return nil, err
	}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where := ""
	if query != "" {
		where += " AND strpos(r.name_key, lower(" + arg(query) + ")) > 0"
	}
	// The keyset: name_key and id are compared with leakproof operators, so
	// the page starts where the index says, not after reading every
	// repository before it (migration 0067). A repository deleted since
	// the cursor was made has no name_key: the listing ends.
	if afterID != 0 {
		n := arg(afterID)
		where += " AND (r.name_key, r.id) > ((SELECT c.name_key FROM repositories c WHERE c.tenant_id = $1 AND c.id = " + n + "), " + n + ")"
	}
	var out []codelotse.Repository
	err = db.readTenantWith(ctx, tenantID, o, `
		SELECT r.id, r.full_name, r.default_branch, r.private, r.url, coalesce(r.indexed_commit, ''), r.indexed_at,
		       (SELECT count(DISTINCT p.id) FROM pull_requests p
		         JOIN reviews v ON v.tenant_id = p.tenant_id AND v.pull_request_id = p.id
		         WHERE p.tenant_id = r.tenant_id AND p.repository_id = r.id AND p.state = 'open')::int
		FROM repositories r
		WHERE r.tenant_id = $1 AND `+grants+where+`
		ORDER BY r.name_key, r.id
		LIMIT $2`,
		args,
		func(rows pgx.Rows) error {
			for rows.Next() {
				var r codelotse.Repository
				if err := rows.Scan(&r.ID, &r.FullName, &r.DefaultBranch, &r.Private, &r.URL, &r.IndexedCommit, &r.IndexedAt, &r.OpenReviews); err != nil {
					return err
				}
				r.TenantID = tenantID
				out = append(out, r)
			}
			return nil
		})
	return out, err
}

// ResolveRepository finds a viewable repository by id or full name. Unknown
// and forbidden repositories give the same NotFound error, "Not found.", so
// that a caller cannot probe for repositories it may not see.
func (t TenantDB) ResolveRepository(ctx context.Context, f RepoFilter, ref string) (_ codelotse.Repository, err error) {
	defer wrap(&err, "postgres.ResolveRepository")
	db, tenantID := t.db, t.tenantID
	ref = strings.TrimSpace(ref)
	var id int64 = -1
	if n, err := strconv.ParseInt(ref, 10, 64); err == nil {
		id = n
	}
	var r codelotse.Repository
	found := false
	// At most two rows, one by id and one by name (full names are unique per
	// tenant, case-insensitively); the first granted one answers, as the
	// LIMIT 1 of the grant-filtered statement did. The grant is checked here,
	// not by the statement, so that a member's thousands of grants are not
	// planned as constants on every call (widegrants.go). Both conditions
	// are index conditions under RLS (name_key, migration 0067). No ORDER
	// BY: with one, the generic plan walks the primary key through every
	// repository of the tenant.
	err = db.readTenant(ctx, tenantID, 0, `
		SELECT id, full_name, default_branch, private, url, coalesce(indexed_commit, ''), indexed_at
		FROM repositories
		WHERE tenant_id = $1 AND (id = $2 OR name_key = lower($3))`,
		[]any{tenantID, id, ref},
		func(rows pgx.Rows) error {
			for rows.Next() && !found {
				var c codelotse.Repository
				if err := rows.Scan(&c.ID, &c.FullName, &c.DefaultBranch, &c.Private, &c.URL, &c.IndexedCommit, &c.IndexedAt); err != nil {
					return err
				}
				if f.All || slices.Contains(f.IDs, c.ID) {
					r, found = c, true
				}
			}
			return nil
		})
	if err != nil {
		return r, err
	}
	if !found {
		return r, codelotse.Errorf(codelotse.NotFound, "Not found.")
	}
	r.TenantID = tenantID
	return r, nil
}

// IndexedRepositoryIDs lists the viewable repositories that have a code index.
func (t TenantDB) IndexedRepositoryIDs(ctx context.Context, f RepoFilter) (_ []int64, err error) {
	defer wrap(&err, "postgres.IndexedRepositoryIDs")
	db, tenantID := t.db, t.tenantID
	var ids []int64
	grants, args, o, err := t.grantWhere(ctx, f, "id", tenantID)
	if err != nil {
		return nil, err
	}
	err = db.readTenantWith(ctx, tenantID, o, `SELECT id FROM repositories
		WHERE tenant_id = $1 AND `+grants+` AND indexed_commit IS NOT NULL ORDER BY id`,
		args, func(rows pgx.Rows) error {
			var err error
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			return err
		})
	return ids, err
}

// RepositoryByID reads a repository of the tenant (system use: jobs).
func (tx *Tx) RepositoryByID(ctx context.Context, id int64) (_ codelotse.Repository, err error) {
	defer wrap(&err, "postgres.RepositoryByID")
	tenantID := tx.tenantID
	var r codelotse.Repository
	err = tx.q.QueryRow(ctx, `SELECT id, full_name, default_branch, private, url, coalesce(indexed_commit, '') FROM repositories
		WHERE tenant_id = $1 AND id = $2`, tenantID, id).Scan(&r.ID, &r.FullName, &r.DefaultBranch, &r.Private, &r.URL, &r.IndexedCommit)
	r.TenantID = tenantID
	return r, notFound(err, "repository not found")
}

// RemoveGitHubRepositoriesExcept deletes the tenant's GitHub repositories
// whose GitHub id is not in keep (the installation lost access to them),
// with their reviews, findings and index. It returns how many went.
func (tx *Tx) RemoveGitHubRepositoriesExcept(ctx context.Context, keep []int64, actor Actor) (_ int, err error) {
	defer wrap(&err, "postgres.RemoveGitHubRepositoriesExcept")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `DELETE FROM repositories WHERE tenant_id = $1 AND github_id IS NOT NULL AND NOT (github_id = ANY($2))
		RETURNING full_name`, tenantID, keep)
	if err != nil {
		return 0, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	for _, n := range names {
		if err := tx.insertAudit(ctx, actor, "repository.removed", n, nil); err != nil {
			return 0, err
		}
	}
	return len(names), nil
}

// ExpireGitHubMemberships makes the cached memberships of the tenant's users
// with these GitHub ids stale (webhooks of removed members and changed
// teams), so their tokens answer 401 until they sign in again.
func (tx *Tx) ExpireGitHubMemberships(ctx context.Context, githubUserIDs []int64, actor Actor) (_ int, err error) {
	defer wrap(&err, "postgres.ExpireGitHubMemberships")
	tenantID := tx.tenantID
	tag, err := tx.q.Exec(ctx, `UPDATE tenant_memberships m SET refreshed_at = 'epoch', expired_at = statement_timestamp()
		FROM users u WHERE m.tenant_id = $1 AND u.tenant_id = m.tenant_id AND u.id = m.user_id AND u.github_user_id = ANY($2)`,
		tenantID, githubUserIDs)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() > 0 {
		err = tx.insertAudit(ctx, actor, "membership.expired", fmt.Sprint(githubUserIDs), map[string]any{"count": tag.RowsAffected()})
	}
	return int(tag.RowsAffected()), err
}

// ExpireAllGitHubMemberships makes every cached GitHub membership of the
// tenant stale (events that change access broadly, such as team changes).
func (tx *Tx) ExpireAllGitHubMemberships(ctx context.Context, actor Actor) (_ int, err error) {
	defer wrap(&err, "postgres.ExpireAllGitHubMemberships")
	tenantID := tx.tenantID
	tag, err := tx.q.Exec(ctx, `UPDATE tenant_memberships SET refreshed_at = 'epoch', expired_at = statement_timestamp()
		WHERE tenant_id = $1 AND source = 'github'`, tenantID)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() > 0 {
		err = tx.insertAudit(ctx, actor, "membership.expired", "all", map[string]any{"count": tag.RowsAffected()})
	}
	return int(tag.RowsAffected()), err
}

// RepositoryNames lists the full names of the tenant's repositories,
// case-insensitively sorted.
func (tx *Tx) RepositoryNames(ctx context.Context) (_ []string, err error) {
	defer wrap(&err, "postgres.RepositoryNames")
	rows, err := tx.q.Query(ctx, `SELECT full_name FROM repositories WHERE tenant_id = $1 ORDER BY lower(full_name)`, tx.tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
