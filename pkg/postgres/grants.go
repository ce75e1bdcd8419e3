package postgres

import (
	"context"

	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// GitHubGrantInputs reads a user's cached tenant membership (nil if none)
// and repository memberships in one round trip.
func (db *DB) GitHubGrantInputs(ctx context.Context, tenantID, userID string) (*codelotse.Membership, []int64, error) {
	var m *codelotse.Membership
	var repos []int64
	err := db.ReadTenant(ctx, tenantID, `
		SELECT m.role, m.source, m.refreshed_at,
		       coalesce((SELECT array_agg(rm.repository_id) FROM repo_memberships rm
		                 WHERE rm.tenant_id = $1 AND rm.user_id = $2), '{}')
		FROM (SELECT 1) one
		LEFT JOIN tenant_memberships m ON m.tenant_id = $1 AND m.user_id = $2`,
		[]any{tenantID, userID},
		func(rows pgx.Rows) error {
			for rows.Next() {
				var role, source *string
				var mm codelotse.Membership
				var at *time.Time
				if err := rows.Scan(&role, &source, &at, &repos); err != nil {
					return err
				}
				if role != nil {
					mm.Role, mm.Source, mm.RefreshedAt = codelotse.Role(*role), *source, *at
					m = &mm
				}
			}
			return nil
		})
	return m, repos, err
}

// GroupMappings reads the tenant's current mappings of a provider for the
// given groups.
func (db *DB) GroupMappings(ctx context.Context, tenantID, idpID string, groups []string) ([]codelotse.GroupMapping, error) {
	var out []codelotse.GroupMapping
	err := db.ReadTenant(ctx, tenantID, `
		SELECT group_name, role, repository_id FROM oidc_group_mappings
		WHERE tenant_id = $1 AND idp_id = $2 AND group_name = ANY($3)`,
		[]any{tenantID, idpID, groups},
		func(rows pgx.Rows) error {
			for rows.Next() {
				var m codelotse.GroupMapping
				var role string
				if err := rows.Scan(&m.Group, &role, &m.RepositoryID); err != nil {
					return err
				}
				m.Role = codelotse.Role(role)
				out = append(out, m)
			}
			return nil
		})
	return out, err
}
