package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// refreshCodeStats refreshes tenant's trigram estimates (forced) as the
// runtime role.
func refreshCodeStats(t testing.TB, env *pgtest.Env, tenant string) {
	t.Helper()
	ctx := context.Background()
	if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error { return tx.RefreshCodeStats(ctx, true) }); err != nil {
		t.Fatal(err)
	}
}

// forgeCodeStats writes trigram estimates for tenant as the administrator
// (the empty trigram: its chunk count), so that a test chooses what the
// search believes.
func forgeCodeStats(t testing.TB, env *pgtest.Env, tenant string, chunks map[string]int64) {
	t.Helper()
	grams, counts := make([]string, 0, len(chunks)), make([]int64, 0, len(chunks))
	for g, n := range chunks {
		grams, counts = append(grams, g), append(counts, n)
	}
	if _, err := env.Admin.Pool.Exec(context.Background(), `INSERT INTO code_trigram_stats (tenant_id, trigram, chunks)
		SELECT $1, g, n FROM unnest($2::text[], $3::bigint[]) AS x(g, n)`, tenant, grams, counts); err != nil {
		t.Fatal(err)
	}
}

// everyChunk is estimates saying that a tenant of n chunks holds each of
// grams in every one.
func everyChunk(n int64, grams ...string) map[string]int64 {
	m := map[string]int64{"": n}
	for _, g := range grams {
		m[g] = n
	}
	return m
}

// TestRefreshCodeStats: a tenant's trigram estimates are its own chunks'
// counts (exact below twice the sample), with its chunk count under the
// empty trigram; another tenant's refresh leaves them alone and the
// runtime role reads only its own tenant's; a refresh without force skips
// a tenant whose chunk count moved less than a tenth, and indexing a
// repository refreshes.
func TestRefreshCodeStats(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a, _ := seedCode(t, env, "stats-a", 3, 100) // 600 chunks
	b, _ := seedCode(t, env, "stats-b", 2, 50)  // 200 chunks
	refresh := func(tenant string, force bool) {
		t.Helper()
		if force {
			refreshCodeStats(t, env, tenant)
			return
		}
		if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error { return tx.RefreshCodeStats(ctx, false) }); err != nil {
			t.Fatal(err)
		}
	}
	// est is the estimate for trigram g as the runtime role in tenant, and
	// exact the true count of chunks holding it.
	est := func(tenant, g string) (n int64) {
		t.Helper()
		if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
			return postgres.Raw(tx).QueryRow(ctx, `SELECT coalesce((SELECT chunks FROM code_trigram_stats WHERE trigram = $1), -1)`, g).Scan(&n)
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exact := func(tenant, g string) (n int64) {
		t.Helper()
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM code_chunks WHERE tenant_id = $1 AND show_trgm(content) @> ARRAY[$2]`, tenant, g).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	refresh(a, true)
	for _, g := range []string{"com", "mon", "nee", "dle", "pac"} {
		if got, want := est(a, g), exact(a, g); got != want || want == 0 {
			t.Errorf("trigram %q: estimate %d, %d chunks hold it", g, got, want)
		}
	}
	if got := est(a, ""); got != 600 {
		t.Errorf("chunk count %d, want 600", got)
	}
	if got := est(b, ""); got != -1 {
		t.Errorf("tenant b has estimates (%d) before any refresh of its own", got)
	}
	refresh(b, true)
	if got := est(b, ""); got != 200 {
		t.Errorf("tenant b's chunk count %d, want 200", got)
	}
	if got := est(a, ""); got != 600 {
		t.Errorf("tenant a's chunk count %d after b's refresh, want 600", got)
	}
	var rows, tenants int
	if err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		return postgres.Raw(tx).QueryRow(ctx, `SELECT count(*), count(DISTINCT tenant_id) FROM code_trigram_stats`).Scan(&rows, &tenants)
	}); err != nil {
		t.Fatal(err)
	}
	if rows == 0 || tenants != 1 {
		t.Errorf("the runtime role in tenant a reads %d rows of %d tenants", rows, tenants)
	}

	// 30 more chunks (5 %): no refresh without force; 100 more: a refresh.
	grow := func(n int) {
		t.Helper()
		if _, err := env.Admin.Pool.Exec(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			SELECT tenant_id, repository_id, file_id, 900, 950, 'xyzzy plugh' FROM code_chunks WHERE tenant_id = $1 ORDER BY id LIMIT $2`, a, n); err != nil {
			t.Fatal(err)
		}
	}
	grow(30)
	refresh(a, false)
	if got := est(a, ""); got != 600 {
		t.Errorf("chunk count %d after 5 %% more chunks, want the old 600 (no refresh)", got)
	}
	grow(100)
	refresh(a, false)
	if got := est(a, ""); got != 730 {
		t.Errorf("chunk count %d after 130 more chunks, want 730", got)
	}
	if got := est(a, "yzz"); got != 130 {
		t.Errorf("trigram yzz: estimate %d, want 130", got)
	}

	// Indexing a repository refreshes its tenant's estimates.
	c := seedTenant(t, env, "stats-c")
	repo := addRepo(t, env, c, "c/api")
	if err := env.App.InTenant(ctx, c, func(tx *postgres.Tx) error {
		_, err := tx.ReplaceIndex(ctx, repo.ID, codeindex.Snapshot{Commit: "3333333333333333333333333333333333333333", Files: []codeindex.File{
			file("main.go", "package main\n\nfunc Quixotic() {}\n"),
		}}, postgres.Actor{Label: "test"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := est(c, "qui"); got != 1 {
		t.Errorf("after indexing, trigram qui: estimate %d, want 1", got)
	}
}

// TestCodeStatsLongLiteral: a literal of many words whose every share is
// small multiplies them past what exp() can represent; the estimate is
// clamped instead of failing the search (found in review: SQLSTATE 22003).
func TestCodeStatsLongLiteral(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	tenant, repos := seedCodeSpread(t, env, "long", 12, 100, 3)
	words := []string{"aaa", "aaa", "aaa"}
	chunks := map[string]int64{"": 400000, "aaa": 8200}
	for i := 0; len(words) < 203; i++ {
		w := string(rune('b'+i/26%24)) + string(rune('a'+i%26)) + "q"
		words, chunks[w] = append(words, w), 8300
	}
	forgeCodeStats(t, env, tenant, chunks)
	query := strings.Join(words, " ")
	plan, err := codeindex.NewPlan(query, false, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.App.Tenant(tenant).SearchCandidates(ctx, repos, plan.LikePatterns(), plan.Regex, "", 0, 42)
	if err != nil || len(got) != 0 {
		t.Fatalf("a %d-character literal: %d candidates, %v", len(query), len(got), err)
	}
	// A tenant last counted at no chunks (all of its code deleted, say)
	// has no shares: its estimates are ignored, never divided by.
	if _, err := env.Admin.Pool.Exec(ctx, `UPDATE code_trigram_stats SET chunks = 0 WHERE tenant_id = $1 AND trigram = ''`, tenant); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{query, "aaa baq caq"} {
		plan, err := codeindex.NewPlan(q, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.App.Tenant(tenant).SearchCandidates(ctx, repos, plan.LikePatterns(), plan.Regex, "", 0, 42); err != nil {
			t.Fatalf("estimates of no chunks, %q: %v", q, err)
		}
	}
}
