package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/benchstat"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// BenchmarkSearchFindingsBigTenant measures search_findings' storage query
// on the seeded big tenant of issue 11 (pgtest.SeedBigTenant), at the size
// BIGTENANT_DIV gives (1 = full size: 400,000 findings; default 10), as the
// runtime role under RLS. Each case runs the current query ("now") and the
// query of the first version ("before": one statement with strpos and
// "$n = ” OR …" filters), in the same run, and reports p50 and p90:
//
//	BIGTENANT_DIV=1 go test ./pkg/postgres -run '^$' -bench SearchFindingsBigTenant -benchtime 40x -timeout 30m
func BenchmarkSearchFindingsBigTenant(b *testing.B) {
	env, s := seedBig(b, pgtest.Div(b))
	ctx := context.Background()
	member := postgres.RepoFilter{IDs: s.MemberRepoIDs}
	admin := postgres.RepoFilter{All: true}
	repo := s.MemberRepoIDs[0]
	pr := 1
	cases := []struct {
		name string
		f    postgres.FindingFilter
	}{
		{"query=saml/member", postgres.FindingFilter{Repos: member, Query: pgtest.RareWord, Status: "open"}},
		{"query=saml/admin", postgres.FindingFilter{Repos: admin, Query: pgtest.RareWord, Status: "open"}},
		{"query=error/member", postgres.FindingFilter{Repos: member, Query: pgtest.CommonWord, Status: "open"}},
		{"rule=common/member", postgres.FindingFilter{Repos: member, Rule: "rule-7", Status: "open"}},
		{"rule=rare/member", postgres.FindingFilter{Repos: member, Rule: pgtest.RareRule, Status: "open"}},
		{"pull_request/member", postgres.FindingFilter{Repos: member, RepoID: &repo, PRNumber: &pr, Status: "open"}},
		{"path=pkg/dir1/member", postgres.FindingFilter{Repos: member, PathPrefix: "pkg/dir1/", Status: "open"}},
		{"repository/member", postgres.FindingFilter{Repos: member, RepoID: &repo, Status: "open"}},
		{"severity=high/member", postgres.FindingFilter{Repos: member, MinSeverity: codelotse.SeverityHigh, Status: "open"}},
	}
	for _, tc := range cases {
		tc.f.Limit = 21
		for _, impl := range []string{"now", "before"} {
			b.Run(tc.name+"/"+impl, func(b *testing.B) {
				run := func() {
					var err error
					if impl == "now" {
						_, err = env.App.Tenant(s.TenantID).SearchFindings(ctx, tc.f)
					} else {
						err = searchFindingsBefore(ctx, env.App, s.TenantID, tc.f)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				reportP50P90(b, run)
			})
		}
	}
}

// seedBig makes a fresh database holding the big tenant divided by div.
func seedBig(tb testing.TB, div int) (*pgtest.Env, pgtest.Seeded) {
	tb.Helper()
	env := pgtest.New(tb)
	start := time.Now()
	s, err := pgtest.SeedBigTenant(context.Background(), env.AdminURL, "big", pgtest.Scaled(div))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("seeded 1/%d of the big tenant in %s", div, time.Since(start).Round(time.Millisecond))
	return env, s
}

// reportP50P90 runs run once to warm the plan and buffer caches, then b.N
// times, and reports the p50 and p90 of those calls. BENCH_SLOW_MS=n logs
// each call slower than n ms with the time it started, to line up a rare
// slow call with what else the machine and the database were doing (the
// database's log, pg_stat_user_tables' last_autovacuum, vmstat).
func reportP50P90(b *testing.B, run func()) {
	var slow time.Duration
	if v := os.Getenv("BENCH_SLOW_MS"); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("BENCH_SLOW_MS=%q: %v", v, err)
		}
		slow = time.Duration(n * float64(time.Millisecond))
	}
	run()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		run()
		d := time.Since(t0)
		times = append(times, d)
		if slow > 0 && d > slow {
			fmt.Fprintf(os.Stderr, "slow call: %s call %d took %s, started %s\n", b.Name(), i+1, d.Round(time.Microsecond), t0.UTC().Format("15:04:05.000"))
		}
	}
	b.StopTimer()
	benchstat.ReportMs(b, times, 0.5, 0.9)
}

// searchFindingsBefore is the statement SearchFindings ran before issue 11,
// kept here only as the benchmark's baseline.
func searchFindingsBefore(ctx context.Context, db *postgres.DB, tenantID string, f postgres.FindingFilter) error {
	minRank := 0
	if f.MinSeverity != "" {
		minRank = f.MinSeverity.Rank()
	}
	return db.InTenant(ctx, tenantID, func(tx *postgres.Tx) error {
		rows, err := postgres.Raw(tx).Query(ctx, `SELECT f.id, f.title, f.body
			FROM findings f
			JOIN repositories r ON r.tenant_id = f.tenant_id AND r.id = f.repository_id
			LEFT JOIN pull_requests p ON p.tenant_id = f.tenant_id AND p.id = f.pull_request_id
			WHERE f.tenant_id = $1
			  AND ($2 OR f.repository_id = ANY($3))
			  AND ($4::bigint IS NULL OR f.repository_id = $4)
			  AND ($5 = '' OR strpos(lower(f.title || ' ' || f.body || ' ' || f.rule_key || ' ' || f.path), lower($5)) > 0)
			  AND array_position(ARRAY['info','low','medium','high','critical'], f.severity) - 1 >= $6
			  AND ($7 = '' OR f.status = $7)
			  AND ($8 = '' OR f.rule_key = $8)
			  AND ($9 = '' OR left(f.path, length($9)) = $9)
			  AND ($10::int IS NULL OR p.number = $10)
			ORDER BY f.created_at DESC, f.id DESC
			LIMIT $11`,
			tenantID, f.Repos.All, f.Repos.IDs, f.RepoID, f.Query, minRank, f.Status, f.Rule, f.PathPrefix, f.PRNumber, f.Limit)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		rows.Close()
		return rows.Err()
	})
}
