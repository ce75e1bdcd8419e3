package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// refFinding is what the reference implementation needs of a finding.
type refFinding struct {
	id, repo   int64
	pr         int
	rule, sev  string
	status     string
	path, text string
	created    time.Time
}

func loadReference(t *testing.T, env *pgtest.Env, tenant string) []refFinding {
	t.Helper()
	ctx := context.Background()
	var out []refFinding
	err := env.Admin.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		rows, err := postgres.Raw(tx).Query(ctx, `SELECT f.id, f.repository_id, coalesce(p.number, 0), f.rule_key, f.severity, f.status, f.path,
			lower(f.title || ' ' || f.body || ' ' || f.rule_key || ' ' || f.path), f.created_at
			FROM findings f LEFT JOIN pull_requests p ON p.tenant_id = f.tenant_id AND p.id = f.pull_request_id
			WHERE f.tenant_id = $1 ORDER BY f.created_at DESC, f.id DESC`, tenant)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (refFinding, error) {
			var x refFinding
			return x, r.Scan(&x.id, &x.repo, &x.pr, &x.rule, &x.sev, &x.status, &x.path, &x.text, &x.created)
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSearchFindingsMatchesReference checks the two-phase text search and
// the built-up WHERE clause against a plain reference over every row: for
// common and rare words, each filter, and paging to the end, the ids and
// their order are exactly the reference's.
func TestSearchFindingsMatchesReference(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	s, err := pgtest.SeedBigTenant(ctx, env.AdminURL, "big", pgtest.Scaled(40))
	if err != nil {
		t.Fatal(err)
	}
	all := loadReference(t, env, s.TenantID)
	member := postgres.RepoFilter{IDs: s.MemberRepoIDs}
	admin := postgres.RepoFilter{All: true}
	repo := s.MemberRepoIDs[3]
	foreign := s.RepoIDs[len(s.RepoIDs)-1]
	if slices.Contains(s.MemberRepoIDs, foreign) {
		t.Fatal("the fixture's member sees every repository")
	}
	pr := 2

	cases := []struct {
		name string
		f    postgres.FindingFilter
		keep func(refFinding) bool
	}{
		{"common word, member", postgres.FindingFilter{Repos: member, Query: pgtest.CommonWord}, func(x refFinding) bool { return strings.Contains(x.text, "error") }},
		{"rare word, member", postgres.FindingFilter{Repos: member, Query: pgtest.RareWord}, func(x refFinding) bool { return strings.Contains(x.text, "saml") }},
		{"rare word, admin", postgres.FindingFilter{Repos: admin, Query: "SAML Assertion"}, func(x refFinding) bool { return strings.Contains(x.text, "saml assertion") }},
		{"word in older rows only", postgres.FindingFilter{Repos: admin, Query: "rule-7 pkg/dir"}, func(x refFinding) bool { return strings.Contains(x.text, "rule-7 pkg/dir") }},
		{"no match", postgres.FindingFilter{Repos: admin, Query: "zzzqqq"}, func(refFinding) bool { return false }},
		{"percent is literal", postgres.FindingFilter{Repos: admin, Query: "%"}, func(x refFinding) bool { return strings.Contains(x.text, "%") }},
		{"short query", postgres.FindingFilter{Repos: member, Query: "ni"}, func(x refFinding) bool { return strings.Contains(x.text, "ni") }},
		{"rule", postgres.FindingFilter{Repos: member, Rule: "rule-7", Status: "open"}, func(x refFinding) bool { return x.rule == "rule-7" && x.status == "open" }},
		{"rule and text", postgres.FindingFilter{Repos: member, Rule: "rule-7", Query: "leak"}, func(x refFinding) bool { return x.rule == "rule-7" && strings.Contains(x.text, "leak") }},
		{"severity and path", postgres.FindingFilter{Repos: member, MinSeverity: codelotse.SeverityHigh, PathPrefix: "pkg/dir1"}, func(x refFinding) bool {
			return (x.sev == "high" || x.sev == "critical") && strings.HasPrefix(x.path, "pkg/dir1")
		}},
		{"repository", postgres.FindingFilter{Repos: member, RepoID: &repo}, func(x refFinding) bool { return x.repo == repo }},
		{"pull request", postgres.FindingFilter{Repos: member, RepoID: &repo, PRNumber: &pr}, func(x refFinding) bool { return x.repo == repo && x.pr == pr }},
		// A repository outside the grants: nothing, however wide the grants.
		{"repository not granted", postgres.FindingFilter{Repos: member, RepoID: &foreign}, func(refFinding) bool { return false }},
		{"repository not granted, text", postgres.FindingFilter{Repos: member, RepoID: &foreign, Query: pgtest.CommonWord}, func(refFinding) bool { return false }},
		{"pull request and text", postgres.FindingFilter{Repos: member, RepoID: &repo, PRNumber: &pr, Query: "e"}, func(x refFinding) bool {
			return x.repo == repo && x.pr == pr && strings.Contains(x.text, "e")
		}},
		{"no grants", postgres.FindingFilter{Repos: postgres.RepoFilter{}, Query: pgtest.CommonWord}, func(refFinding) bool { return false }},
	}
	// Each case twice: the member's 50 grants of 75 repositories checked
	// in the narrow form, then (with the threshold lowered) in the wide one.
	for _, wide := range []bool{false, true} {
		if wide {
			postgres.SetWideGrants(env.App, 2, nil)
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/wide=%v", tc.name, wide), func(t *testing.T) {
				if ok, err := postgres.WideGrants(ctx, env.App.Tenant(s.TenantID), tc.f.Repos); err != nil || ok != (wide && !tc.f.Repos.All && len(tc.f.Repos.IDs) > 0) {
					t.Fatalf("WideGrants = %v, %v", ok, err)
				}
				granted := func(x refFinding) bool { return tc.f.Repos.All || slices.Contains(tc.f.Repos.IDs, x.repo) }
				var want []int64
				for _, x := range all {
					if granted(x) && tc.keep(x) {
						want = append(want, x.id)
					}
				}
				// Page through with a page size that makes phase 1 and phase 2
				// meet: the cursor moves the window down the table.
				var got []int64
				f := tc.f
				f.Limit = 97
				// Fifteen pages are enough to cross from phase 1 to phase 2
				// and back; the rest of a common word's matches would only
				// make the test slow.
				const pages = 15
				complete := false
				for page := 0; page < pages; page++ {
					res, err := env.App.Tenant(s.TenantID).SearchFindings(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					for _, x := range res {
						got = append(got, x.ID)
					}
					if len(res) < f.Limit {
						complete = true
						break
					}
					last := res[len(res)-1]
					f.AfterID = last.ID
				}
				if !complete && len(want) > len(got) {
					want = want[:len(got)]
				}
				if !slices.Equal(got, want) {
					t.Fatalf("got %d findings, want %d (first got %v, first want %v)", len(got), len(want), head(got), head(want))
				}
				if len(want) == 0 && tc.name != "no match" && tc.name != "no grants" && tc.name != "percent is literal" && !strings.HasPrefix(tc.name, "repository not granted") {
					t.Fatal("the case matches nothing: the fixture no longer exercises it")
				}
			})
		}
	}
}

func head(x []int64) []int64 { return x[:min(len(x), 5)] }

// TestSearchFindingIDsStaysInItsTenant calls the SECURITY DEFINER function
// directly, as the runtime role, with another tenant's repository ids and
// with p_all: it returns nothing of the other tenant.
func TestSearchFindingIDsStaysInItsTenant(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a, err := pgtest.SeedBigTenant(ctx, env.AdminURL, "tenant-a", pgtest.Scaled(400))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pgtest.SeedBigTenant(ctx, env.AdminURL, "tenant-b", pgtest.Scaled(400))
	if err != nil {
		t.Fatal(err)
	}
	wide := false
	call := func(tenant string, all bool, repos []int64, repo *int64) []int64 {
		var ids []int64
		err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
			rows, err := postgres.Raw(tx).Query(ctx, `SELECT id FROM search_finding_ids($1, $2, $3, 'error', NULL, NULL, NULL, NULL, NULL, NULL, 0, 1000, $4)`, all, repos, repo, wide)
			if err != nil {
				return err
			}
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	owned := func(tenant string, ids []int64) bool {
		var n int
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM findings WHERE tenant_id <> $1 AND id = ANY($2)`, tenant, ids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	}
	// Both forms of the grant check (narrow and wide, widegrants.go).
	for _, wide = range []bool{false, true} {
		if got := call(a.TenantID, false, b.RepoIDs, nil); len(got) != 0 {
			t.Fatalf("wide=%v: tenant A with tenant B's repository ids found %d findings", wide, len(got))
		}
		if got := call(a.TenantID, false, append(b.RepoIDs, a.RepoIDs[0]), nil); len(got) == 0 || !owned(a.TenantID, got) {
			t.Fatalf("wide=%v: tenant A with B's ids and one of its own: %d findings, all of tenant A: %v", wide, len(got), owned(a.TenantID, got))
		}
	}
	wide = false
	if got := call(a.TenantID, false, b.RepoIDs, &b.RepoIDs[0]); len(got) != 0 {
		t.Fatalf("tenant A naming tenant B's repository found %d findings", len(got))
	}
	got := call(a.TenantID, true, nil, nil)
	if len(got) == 0 || !owned(a.TenantID, got) {
		t.Fatalf("p_all in tenant A: %d findings, all of tenant A: %v", len(got), owned(a.TenantID, got))
	}
	if got := call(b.TenantID, false, a.MemberRepoIDs, nil); len(got) != 0 {
		t.Fatalf("tenant B with tenant A's repository ids found %d findings", len(got))
	}
}

// TestSearchFindingsPlans asserts, on seeded data and as the runtime role
// under RLS, that each kind of search_findings query uses the index built
// for it, so that a later change cannot silently fall back to reading the
// tenant's findings. auto_explain logs the plans of the statements inside
// search_finding_ids too; they reach the test as notices.
func TestSearchFindingsPlans(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	s, err := pgtest.SeedBigTenant(ctx, env.AdminURL, "big", pgtest.Scaled(20))
	if err != nil {
		t.Fatal(err)
	}
	conn, plans := explainConn(t, env)
	member := postgres.RepoFilter{IDs: s.MemberRepoIDs}
	repo := s.MemberRepoIDs[1]
	pr := 3
	for _, tc := range []struct {
		name  string
		f     postgres.FindingFilter
		want  []string
		never []string
		wide  bool
	}{
		{"rare word", postgres.FindingFilter{Repos: member, Query: pgtest.RareWord, Status: "open"}, []string{"findings_search_trgm"}, []string{"Seq Scan on findings"}, false},
		{"rare word, admin", postgres.FindingFilter{Repos: postgres.RepoFilter{All: true}, Query: pgtest.RareWord}, []string{"findings_search_trgm"}, []string{"Seq Scan on findings"}, false},
		{"common word", postgres.FindingFilter{Repos: member, Query: pgtest.CommonWord}, []string{"findings_tenant_created"}, []string{"Seq Scan on findings", "findings_search_trgm"}, false},
		{"rule", postgres.FindingFilter{Repos: member, Rule: pgtest.RareRule}, []string{"findings_tenant_rule_created"}, []string{"Seq Scan on findings"}, false},
		{"pull request", postgres.FindingFilter{Repos: member, RepoID: &repo, PRNumber: &pr}, []string{"findings_tenant_pr_created"}, []string{"Seq Scan on findings"}, false},
		{"repository", postgres.FindingFilter{Repos: member, RepoID: &repo}, []string{"findings_tenant_repo_created"}, []string{"Seq Scan on findings"}, false},
		// Wide grants (widegrants.go): the same indexes, the grant check a
		// filter over a constant array (so it is hashed), never the
		// repositories' index, which would read every granted
		// repository's findings and sort them.
		{"rare word, wide grants", postgres.FindingFilter{Repos: member, Query: pgtest.RareWord, Status: "open"}, []string{"findings_search_trgm", wideCheck}, []string{"Seq Scan on findings", "findings_tenant_repo_created"}, true},
		{"common word, wide grants", postgres.FindingFilter{Repos: member, Query: pgtest.CommonWord}, []string{"findings_tenant_created", wideCheck}, []string{"Seq Scan on findings", "findings_search_trgm", "findings_tenant_repo_created"}, true},
		{"rule, wide grants", postgres.FindingFilter{Repos: member, Rule: pgtest.RareRule}, []string{"findings_tenant_rule_created", wideCheck}, []string{"Seq Scan on findings", "findings_tenant_repo_created"}, true},
		{"severity, wide grants", postgres.FindingFilter{Repos: member, MinSeverity: codelotse.SeverityHigh, Status: "open"}, []string{"findings_tenant_created", wideCheck}, []string{"Seq Scan on findings", "findings_tenant_repo_created"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.Limit = 21
			sql, args, err := postgres.SearchFindingsQuery(s.TenantID, tc.f, tc.wide)
			if err != nil {
				t.Fatal(err)
			}
			all := planOf(t, conn, plans, s.TenantID, sql, args...)
			assertPlan(t, all, tc.want, tc.never)
		})
	}
}

// wideCheck is how a plan shows the wide grant check over a constant array.
const wideCheck = "COALESCE((repository_id = ANY ('{"

// explainConn connects as the administrator, loads auto_explain so that the
// plan of every statement — including those inside plpgsql functions —
// arrives as a notice, and then becomes the runtime role, so that the plans
// are the ones RLS allows it. The returned slice collects the plans.
func explainConn(t *testing.T, env *pgtest.Env) (*pgx.Conn, *[]string) {
	t.Helper()
	ctx := context.Background()
	plans := &[]string{}
	cfg, err := pgx.ParseConfig(env.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { *plans = append(*plans, n.Message) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if err := explainSession(ctx, conn, env.Roles.App); err != nil {
		t.Fatal(err)
	}
	return conn, plans
}

// explainSession makes an administrator's connection log the plan of every
// statement it runs, nested ones included, as notices (auto_explain), and
// then act as appRole, so that the plans are the ones RLS allows the
// runtime role; settings are further SET statements.
func explainSession(ctx context.Context, conn *pgx.Conn, appRole string, settings ...string) error {
	for _, q := range append([]string{
		"LOAD 'auto_explain'",
		"SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_nested_statements = on",
		"SET client_min_messages = log",
		"SET ROLE " + pgx.Identifier{appRole}.Sanitize(),
	}, settings...) {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// assertPlan fails t unless plan names every one of want and none of never
// (index names, node types, conditions).
func assertPlan(t *testing.T, plan string, want, never []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(plan, w) {
			t.Errorf("plan does not use %s:\n%s", w, plan)
		}
	}
	for _, n := range never {
		if strings.Contains(plan, n) {
			t.Errorf("plan contains %q:\n%s", n, plan)
		}
	}
}

// planOf runs sql in a transaction of tenant on conn and returns the plans
// auto_explain reported for it.
func planOf(t *testing.T, conn *pgx.Conn, plans *[]string, tenant, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	*plans = (*plans)[:0]
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('app.tenant_id', $1, true)", tenant); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(*plans, "\n")
}
