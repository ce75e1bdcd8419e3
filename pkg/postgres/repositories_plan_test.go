package postgres_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/codelotse/codelotse/pkg/postgres"
)

// explainDB returns a DB whose one connection is an explainSession, so that
// a test can assert the plans of the package's own statements, run through
// its API, as RLS allows them; and a function that returns the plans logged
// since its last call. settings are further SET statements.
func explainDB(t *testing.T, adminURL, appRole string, settings ...string) (*postgres.DB, func() string) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	var mu sync.Mutex
	var plans []string
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		plans = append(plans, n.Message)
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		return explainSession(ctx, c, appRole, settings...)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &postgres.DB{Pool: pool}, func() string {
		mu.Lock()
		defer mu.Unlock()
		out := strings.Join(plans, "\n")
		plans = nil
		return out
	}
}

// TestRepositoryReadPlans asserts that looking a repository up by name or
// id and paging the listing can search the name key's index (migration
// 0067) as the runtime role under RLS, for an admin and for a member with
// wide grants, and that a member's wide grants stay a constant array on
// every call (reads of repositories and of findings): their conditions are
// index conditions, not filters applied
// to every repository of the tenant after the tenant policy (a condition
// with a function that is not leakproof, such as lower(full_name), could
// only be the latter). The fixture's 150 repositories are few enough that
// a sequential scan is cheaper, so sequential scans are switched off: the
// test is about what the index can serve.
func TestRepositoryReadPlans(t *testing.T) {
	t.Parallel()
	env, s := seedBig(t, 20) // 150 repositories, the member sees 100 (wide grants)
	ctx := context.Background()
	db, plans := explainDB(t, env.AdminURL, env.Roles.App, "SET enable_seqscan = off")
	tdb := db.Tenant(s.TenantID)
	member := postgres.RepoFilter{IDs: s.MemberRepoIDs}
	admin := postgres.RepoFilter{All: true}
	mid := s.MemberRepoIDs[50]
	if wide, err := postgres.WideGrants(ctx, tdb, member); err != nil || !wide {
		t.Fatalf("the member's grants are not wide (%v, %v): the test would not run the wide form", wide, err)
	}
	const never = "Seq Scan on repositories"
	for _, tc := range []struct {
		name string
		run  func() error
		want []string
	}{
		{"resolve by name", func() error {
			_, err := tdb.ResolveRepository(ctx, member, "BigOrg/Repo-00051")
			return err
		}, []string{"Bitmap Index Scan on repositories_tenant_name_key", "AND (name_key = "}},
		{"resolve by id", func() error {
			_, err := tdb.ResolveRepository(ctx, admin, strconv.FormatInt(mid, 10))
			return err
		}, []string{"Index Cond: (id = ", "Bitmap Index Scan on repositories_tenant_name_key"}},
		{"list, a later page", func() error {
			_, err := tdb.ListRepositories(ctx, member, "", mid, 21)
			return err
		}, []string{"Index Scan using repositories_tenant_name_key", "AND (ROW(name_key, id) > ROW(", "COALESCE((id = ANY ('{"}},
		{"indexed repositories", func() error {
			_, err := tdb.IndexedRepositoryIDs(ctx, member)
			return err
		}, []string{"COALESCE((id = ANY ('{"}},
		{"findings of a rule", func() error {
			_, err := tdb.SearchFindings(ctx, postgres.FindingFilter{Repos: member, Rule: "rule-7", Limit: 21})
			return err
		}, []string{"findings_tenant_rule_created", wideCheck}},
		{"list, admin, a later page", func() error {
			_, err := tdb.ListRepositories(ctx, admin, "", mid, 21)
			return err
		}, []string{"Index Scan using repositories_tenant_name_key", "AND (ROW(name_key, id) > ROW("}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The first call also reads the tenant's repository count for
			// the member's wide grants (widegrants.go). PostgreSQL plans
			// the first five calls of a prepared statement for their values
			// in any case and may reuse a generic plan from the sixth on,
			// which would carry the grants as a parameter (searched id by id
			// for every row, never hashed): the seventh call is the one
			// asserted, so that the forced custom plan is what keeps the
			// array a constant.
			for range 6 {
				if err := tc.run(); err != nil {
					t.Fatal(err)
				}
			}
			plans()
			if err := tc.run(); err != nil {
				t.Fatal(err)
			}
			assertPlan(t, plans(), tc.want, []string{never})
		})
	}
}
