package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// UpsertRule adds a rule, or replaces the one with the same key in the same
// scope (tenant-wide when repoID is nil).
func (tx *Tx) UpsertRule(ctx context.Context, repoID *int64, r codelotse.Rule) (_ int64, err error) {
	defer wrap(&err, "postgres.UpsertRule")
	tenantID := tx.tenantID
	if r.PathGlobs == nil {
		r.PathGlobs = []string{}
	}
	var id int64
	err = tx.q.QueryRow(ctx, `INSERT INTO rules (tenant_id, repository_id, key, title, severity, path_globs, instructions)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (tenant_id, coalesce(repository_id, 0), key) DO UPDATE
			SET title = EXCLUDED.title, severity = EXCLUDED.severity, path_globs = EXCLUDED.path_globs,
			    instructions = EXCLUDED.instructions, updated_at = now()
		RETURNING id`, tenantID, repoID, r.Key, r.Title, string(r.Severity), r.PathGlobs, r.Instructions).Scan(&id)
	if isCheckViolation(err) {
		return 0, codelotse.Errorf(codelotse.Invalid, "rule key must be 1-100 letters, digits or _.:/- and title 1-200 characters")
	}
	return id, err
}

// RulesInForce returns the tenant-wide rules, plus the rules of repoID when
// it is not nil, ordered by scope (tenant first), severity (highest first)
// and key.
func (t TenantDB) RulesInForce(ctx context.Context, repoID *int64) (_ []codelotse.Rule, err error) {
	defer wrap(&err, "postgres.RulesInForce")
	db, tenantID := t.db, t.tenantID
	var out []codelotse.Rule
	err = db.readTenant(ctx, tenantID, 0, `
		SELECT r.id, r.repository_id, coalesce(p.full_name, ''), r.key, r.title, r.severity, r.path_globs, r.instructions
		FROM rules r
		LEFT JOIN repositories p ON p.tenant_id = r.tenant_id AND p.id = r.repository_id
		WHERE r.tenant_id = $1 AND (r.repository_id IS NULL OR r.repository_id = $2)
		ORDER BY r.repository_id NULLS FIRST,
		         array_position(ARRAY['critical','high','medium','low','info'], r.severity), r.key`,
		[]any{tenantID, repoID},
		func(rows pgx.Rows) error {
			for rows.Next() {
				var r codelotse.Rule
				var sev string
				if err := rows.Scan(&r.ID, &r.RepositoryID, &r.RepoFullName, &r.Key, &r.Title, &sev, &r.PathGlobs, &r.Instructions); err != nil {
					return err
				}
				r.Severity = codelotse.Severity(sev)
				r.TenantID = tenantID
				out = append(out, r)
			}
			return nil
		})
	return out, err
}
