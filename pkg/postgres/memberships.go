package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// GitHubAccess is one GitHub user's access through the tenant's
// installation, as the worker's membership refresh read it.
type GitHubAccess struct {
	Role codelotse.Role
	// RepoIDs are tenant repository ids (not GitHub's).
	RepoIDs []int64
}

// ApplyGitHubMemberships replaces the membership caches of every (not
// deleted) user of the tenant who has a GitHub user id with what the
// installation says now: a user in access gets that role and exactly
// those repositories, stamped now; a user absent from it (no longer a
// member or collaborator) has the tenant membership expired and the
// repository memberships removed, so their tokens answer 401 until a
// sign-in proves access again. Users are matched by GitHub user id only,
// never by login; GitHub users who have never signed in have no user row
// and are matched when they first do.
//
// Repository rows that stay are not rewritten: the token path reads the
// age of the tenant membership only, so an hourly refresh of an unchanged
// organisation writes one row per user, not one per user and repository.
//
// readSince is the database's time (DB.Now) before GitHub was read. A
// user whose membership a webhook expired since then is left as it is:
// what was read may predate the removal, and the refresh the webhook
// queued settles them. The zero time leaves nobody out.
func (tx *Tx) ApplyGitHubMemberships(ctx context.Context, access map[int64]GitHubAccess, now, readSince time.Time, actor Actor) (refreshed, expired int, err error) {
	defer wrap(&err, "postgres.ApplyGitHubMemberships")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT u.id::text, u.github_user_id FROM users u
		WHERE u.tenant_id = $1 AND u.github_user_id IS NOT NULL AND u.deleted_at IS NULL
		AND NOT EXISTS (SELECT 1 FROM tenant_memberships m WHERE m.tenant_id = u.tenant_id AND m.user_id = u.id
			AND m.expired_at >= $2)`, tenantID, nullTime(readSince))
	if err != nil {
		return 0, 0, err
	}
	type known struct {
		id       string
		githubID int64
	}
	users, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (known, error) {
		var k known
		return k, r.Scan(&k.id, &k.githubID)
	})
	if err != nil {
		return 0, 0, err
	}
	var keepIDs, keepRoles, gone []string
	batch := &pgx.Batch{}
	for _, u := range users {
		a, ok := access[u.githubID]
		if !ok {
			gone = append(gone, u.id)
			continue
		}
		if a.Role != codelotse.RoleAdmin && a.Role != codelotse.RoleMember {
			return 0, 0, errors.New("postgres: ApplyGitHubMemberships: role must be admin or member")
		}
		repoIDs := a.RepoIDs
		if repoIDs == nil {
			repoIDs = []int64{}
		}
		keepIDs, keepRoles = append(keepIDs, u.id), append(keepRoles, string(a.Role))
		batch.Queue(`DELETE FROM repo_memberships WHERE tenant_id = $1 AND user_id = $2 AND NOT (repository_id = ANY($3))`, tenantID, u.id, repoIDs)
		batch.Queue(`INSERT INTO repo_memberships (tenant_id, user_id, repository_id, permission, refreshed_at)
			SELECT $1, $2, r, 'read', $4 FROM unnest($3::bigint[]) AS r
			ON CONFLICT (tenant_id, user_id, repository_id) DO NOTHING`, tenantID, u.id, repoIDs, now)
	}
	if len(keepIDs) > 0 {
		batch.Queue(`INSERT INTO tenant_memberships (tenant_id, user_id, role, source, refreshed_at)
			SELECT $1, u, r, 'github', $4 FROM unnest($2::uuid[], $3::text[]) AS x(u, r)
			ON CONFLICT (tenant_id, user_id) DO UPDATE SET role = EXCLUDED.role, source = EXCLUDED.source, refreshed_at = EXCLUDED.refreshed_at`,
			tenantID, keepIDs, keepRoles, now)
	}
	if batch.Len() > 0 {
		if err := tx.q.SendBatch(ctx, batch).Close(); err != nil {
			return 0, 0, err
		}
	}
	if len(gone) > 0 {
		tag, err := tx.q.Exec(ctx, `UPDATE tenant_memberships SET refreshed_at = 'epoch'
			WHERE tenant_id = $1 AND user_id = ANY($2::uuid[]) AND refreshed_at <> 'epoch'`, tenantID, gone)
		if err != nil {
			return 0, 0, err
		}
		expired = int(tag.RowsAffected())
		if _, err := tx.q.Exec(ctx, `DELETE FROM repo_memberships WHERE tenant_id = $1 AND user_id = ANY($2::uuid[])`, tenantID, gone); err != nil {
			return 0, 0, err
		}
	}
	err = tx.insertAudit(ctx, actor, "membership.refreshed", "github", map[string]any{"refreshed": len(keepIDs), "expired": expired})
	return len(keepIDs), expired, err
}

// MembershipRefresh is the outcome of the last membership refresh from the
// tenant's installation.
type MembershipRefresh struct {
	// State is "ok" or "missing_permission".
	State, Detail                string
	Members, Repositories        int
	UsersRefreshed, UsersExpired int
	FinishedAt                   time.Time
	// LastOKAt is the last successful refresh, if any.
	LastOKAt *time.Time
}

// RecordMembershipRefresh stores the outcome of a refresh.
func (tx *Tx) RecordMembershipRefresh(ctx context.Context, r MembershipRefresh) (err error) {
	defer wrap(&err, "postgres.RecordMembershipRefresh")
	tenantID := tx.tenantID
	_, err = tx.q.Exec(ctx, `INSERT INTO github_membership_refreshes
			(tenant_id, state, detail, members, repositories, users_refreshed, users_expired, finished_at, last_ok_at)
		VALUES ($1, $2, left($3, 500), $4, $5, $6, $7, $8, CASE WHEN $2 = 'ok' THEN $8::timestamptz END)
		ON CONFLICT (tenant_id) DO UPDATE SET state = EXCLUDED.state, detail = EXCLUDED.detail, members = EXCLUDED.members,
			repositories = EXCLUDED.repositories, users_refreshed = EXCLUDED.users_refreshed, users_expired = EXCLUDED.users_expired,
			finished_at = EXCLUDED.finished_at,
			last_ok_at = coalesce(EXCLUDED.last_ok_at, github_membership_refreshes.last_ok_at)`,
		tenantID, r.State, r.Detail, r.Members, r.Repositories, r.UsersRefreshed, r.UsersExpired, r.FinishedAt)
	return err
}

// GetMembershipRefresh reads the outcome of the last refresh; nil when the
// worker has never refreshed the tenant's memberships.
func (tx *Tx) GetMembershipRefresh(ctx context.Context) (_ *MembershipRefresh, err error) {
	defer wrap(&err, "postgres.GetMembershipRefresh")
	tenantID := tx.tenantID
	var r MembershipRefresh
	err = tx.q.QueryRow(ctx, `SELECT state, detail, members, repositories, users_refreshed, users_expired, finished_at, last_ok_at
		FROM github_membership_refreshes WHERE tenant_id = $1`, tenantID).
		Scan(&r.State, &r.Detail, &r.Members, &r.Repositories, &r.UsersRefreshed, &r.UsersExpired, &r.FinishedAt, &r.LastOKAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// PullSyncs returns the GitHub updated_at of each pull request of the
// repository as of its last complete sync, by number.
func (tx *Tx) PullSyncs(ctx context.Context, repoID int64) (_ map[int]time.Time, err error) {
	defer wrap(&err, "postgres.PullSyncs")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT number, updated_at FROM github_pull_syncs WHERE tenant_id = $1 AND repository_id = $2`, tenantID, repoID)
	if err != nil {
		return nil, err
	}
	out := map[int]time.Time{}
	var n int
	var t time.Time
	_, err = pgx.ForEachRow(rows, []any{&n, &t}, func() error {
		out[n] = t
		return nil
	})
	return out, err
}

// RecordPullSync records that a pull request was synced completely as of
// GitHub's updatedAt.
func (tx *Tx) RecordPullSync(ctx context.Context, repoID int64, number int, updatedAt time.Time) (err error) {
	defer wrap(&err, "postgres.RecordPullSync")
	tenantID := tx.tenantID
	_, err = tx.q.Exec(ctx, `INSERT INTO github_pull_syncs (tenant_id, repository_id, number, updated_at, synced_at)
		VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (tenant_id, repository_id, number) DO UPDATE SET updated_at = EXCLUDED.updated_at, synced_at = now()`,
		tenantID, repoID, number, updatedAt)
	return err
}

// nullTime is t, or NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
