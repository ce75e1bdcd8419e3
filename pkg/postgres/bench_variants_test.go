package postgres_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// BenchmarkSearchCodeVariants runs BenchmarkSearchCodeBigTenant's cases on
// one fixture for each of several versions of policies/search.sql, so that
// a change to search_code_candidates is compared with the shipped one in
// one sitting on the same data. BENCH_SEARCH_SQL lists the files (each
// applied as the administrator, role names expanded as the migrations
// do), BENCH_SEARCH_ROUNDS repeats the list, BENCH_EXPLAIN names cases
// whose first-round call is logged with EXPLAIN ANALYZE of every nested
// statement (BIGTENANT_DIV and BENCH_FIRST_BATCH as in
// BenchmarkSearchCodeBigTenant):
//
//	git show main:policies/search.sql > /tmp/main.sql
//	BENCH_SEARCH_SQL=/tmp/main.sql,/tmp/other.sql BIGTENANT_DIV=1 go test ./pkg/postgres -run '^$' -bench SearchCodeVariants -benchtime 10x -timeout 50m
func BenchmarkSearchCodeVariants(b *testing.B) {
	if os.Getenv("BENCH_SEARCH_SQL") == "" {
		b.Skip("BENCH_SEARCH_SQL names no versions of policies/search.sql")
	}
	fx := codeBenchSetup(b)
	ctx := context.Background()
	rounds := 1
	if v := os.Getenv("BENCH_SEARCH_ROUNDS"); v != "" {
		var err error
		if rounds, err = strconv.Atoi(v); err != nil {
			b.Fatalf("BENCH_SEARCH_ROUNDS=%q: %v", v, err)
		}
	}
	for round := 0; round < rounds; round++ {
		for _, file := range strings.Split(os.Getenv("BENCH_SEARCH_SQL"), ",") {
			body, err := os.ReadFile(file)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := fx.env.Admin.Pool.Exec(ctx, postgres.Expand(string(body), fx.env.Roles)); err != nil {
				b.Fatalf("%s: %v", file, err)
			}
			name := strings.TrimSuffix(filepath.Base(file), ".sql")
			if cases := os.Getenv("BENCH_EXPLAIN"); cases != "" && round == 0 {
				explainCases(b, fx, name, strings.Split(cases, ","))
			}
			for _, s := range benchSearchers(b) {
				b.Run(fmt.Sprintf("%s#%d/%s", name, round, s.name), func(b *testing.B) { benchSearchCode(b, fx, s.searcher, nil) })
			}
		}
	}
}

// explainCases logs, for each named case, the plans of a first-round call
// of search_code_candidates (the second of two, with warm caches) with
// EXPLAIN ANALYZE of every nested statement, as the runtime role.
func explainCases(b *testing.B, fx *codeBenchFixture, variant string, cases []string) {
	ctx := context.Background()
	var plans []string
	cfg, err := pgx.ParseConfig(fx.env.AdminURL)
	if err != nil {
		b.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { plans = append(plans, n.Message) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_analyze = on",
		"SET auto_explain.log_buffers = on", "SET auto_explain.log_timing = on",
		"SET auto_explain.log_nested_statements = on", "SET client_min_messages = log",
		"SET ROLE " + pgx.Identifier{fx.env.Roles.App}.Sanitize()} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range pgtest.SearchCodeQueries {
		want := false
		for _, c := range cases {
			want = want || c == tc.Name
		}
		if !want {
			continue
		}
		plan, _ := codeindex.NewPlan(tc.Query, tc.Regex, false)
		pf, _ := codeindex.NewPathFilter(tc.Path)
		repos := fx.repos
		if tc.Repo > 0 {
			repos = fx.repos[tc.Repo-1 : tc.Repo]
		}
		limit := 200
		if plan.Tight {
			limit = 42
		}
		var regex any
		if plan.Regex != "" {
			regex = plan.Regex
		}
		pats := plan.LikePatterns()
		if pats == nil {
			pats = []string{}
		}
		for i := 0; i < 2; i++ {
			plans = plans[:0]
			start := time.Now()
			var n int
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SELECT set_config('app.tenant_id', $1, true)", fx.tenant); err != nil {
					return err
				}
				return tx.QueryRow(ctx, `SELECT count(*) FROM search_code_candidates($1, $2, $3, 0, $4, $5)`, repos, pats, pf.Prefix, limit, regex).Scan(&n)
			})
			if err != nil {
				b.Fatal(err)
			}
			if i == 1 {
				fmt.Printf("==== %s %s: %d candidates in %s (instrumented)\n", variant, tc.Name, n, time.Since(start))
				for _, p := range plans {
					fmt.Println(p)
				}
			}
		}
	}
}
