package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// SearchFindingsQuery exposes the statement SearchFindings runs, for the
// plan test.
var SearchFindingsQuery = searchFindingsQuery

// NullIfEmpty exposes the package's optional-text argument (NULL for "").
var NullIfEmpty = nullIfEmpty

// Raw exposes a tenant transaction's pgx transaction, for tests that check
// what row-level security allows a statement (the package's API offers no
// raw SQL on purpose).
func Raw(tx *Tx) pgx.Tx { return tx.q }

// ConfirmedByEpoch reports whether c's facts are the cached ones a read
// confirmed by the tenant's epoch (not a lookup).
func ConfirmedByEpoch(c *AuthCheck) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byEpoch
}

// ReadTenant and ReadTenantTimeout expose the single-round-trip tenant read
// that TenantDB's methods use, for the tests of its isolation and timeout.
func ReadTenant(ctx context.Context, db *DB, tenantID, sql string, args []any, scan func(pgx.Rows) error) error {
	return db.readTenant(ctx, tenantID, 0, sql, args, scan)
}

func ReadTenantTimeout(ctx context.Context, db *DB, tenantID string, timeout time.Duration, sql string, args []any, scan func(pgx.Rows) error) error {
	return db.readTenant(ctx, tenantID, timeout, sql, args, scan)
}

// ReadTenantCustomPlan is the read with a forced custom plan (and a
// timeout, to check that the settings combine).
func ReadTenantCustomPlan(ctx context.Context, db *DB, tenantID string, timeout time.Duration, sql string, args []any, scan func(pgx.Rows) error) error {
	return db.readTenantWith(ctx, tenantID, readOptions{timeout: timeout, customPlan: true}, sql, args, scan)
}

// IsQueryCanceled exposes the SQLSTATE classification of a cancelled
// statement.
var IsQueryCanceled = isQueryCanceled

// Expand exposes the substitution of role names into policy SQL, for the
// benchmark that applies other versions of policies/search.sql.
var Expand = expand

// SetWideGrants makes db treat grants of at least minIDs repositories as
// wide (when they are a fifth of the tenant's) and read the time from now
// (nil: the wall clock), so that tests run the wide form on small fixtures
// and age the repository-count cache.
func SetWideGrants(db *DB, minIDs int, now func() time.Time) {
	db.repoCounts.minIDs = minIDs
	db.repoCounts.now = now
}

// WideGrants exposes the wide-grants decision.
func WideGrants(ctx context.Context, t TenantDB, f RepoFilter) (bool, error) {
	return t.wideGrants(ctx, f)
}
