package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// BenchmarkSearchCodeBigTenant measures the database side of search_code on
// the big tenant's code of issue 11: five indexed copies of the Go
// toolchain's src/ (BENCH_CODE_TREE overrides the tree), of which
// BIGTENANT_DIV keeps every div-th file (1 = full size, about 400,000
// chunks; default 10), so that a literal's density is on average the same
// at every size (not a rare literal's, nor one directory's: at 1/10
// net/http/ keeps 345 of its 9,910 chunks, and deadline exceeded none of
// its 60 matching chunks). Each call runs search_code's engine (codeindex.Searcher, the rounds
// the tool runs: limit 20, context 2) over the candidates of
// search_code_candidates as the runtime role under RLS, and reports p50 and
// p90 of the first page (page1) and of the next one (page2, where there is
// one), with the candidates the database returned for it (cands) and the
// rounds that asked (rounds). BENCH_FIRST_BATCH="42,27" runs the cases once
// per first-round size.
// The command:
//
//	BIGTENANT_DIV=1 go test ./pkg/postgres -run '^$' -bench SearchCodeBigTenant -benchtime 10x -timeout 60m
func BenchmarkSearchCodeBigTenant(b *testing.B) {
	fx := codeBenchSetup(b)
	for _, s := range benchSearchers(b) {
		b.Run(s.name, func(b *testing.B) { benchSearchCode(b, fx, s.searcher, nil) })
	}
}

// namedSearcher is one engine configuration a benchmark runs.
type namedSearcher struct {
	name     string
	searcher codeindex.Searcher
}

// benchSearchers is the engine's defaults ("default"), or with
// BENCH_FIRST_BATCH="42,27" one searcher per first-round size
// (codeindex.Searcher.FirstBatch; "first42", "first27"), in that order, so
// that round sizes are compared on one fixture in one sitting.
func benchSearchers(b *testing.B) []namedSearcher {
	v := os.Getenv("BENCH_FIRST_BATCH")
	if v == "" {
		return []namedSearcher{{"default", codeindex.Searcher{}}}
	}
	var out []namedSearcher
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_FIRST_BATCH=%q: want positive integers", v)
		}
		out = append(out, namedSearcher{fmt.Sprintf("first%d", n), codeindex.Searcher{FirstBatch: n}})
	}
	return out
}

// BenchmarkSearchPullCodeBigTenant runs the same cases as searches at the
// head of a pull request of the third repository (search_code with
// pull_request): its overlay of five changed files, then the base index
// beneath it (one repository of the big tenant), with BIGTENANT_DIV and
// BENCH_FIRST_BATCH as above:
//
//	BIGTENANT_DIV=1 go test ./pkg/postgres -run '^$' -bench SearchPullCodeBigTenant -benchtime 10x -timeout 60m
func BenchmarkSearchPullCodeBigTenant(b *testing.B) {
	fx := codeBenchSetup(b)
	pull := addBenchPull(b, fx)
	for _, s := range benchSearchers(b) {
		b.Run(s.name, func(b *testing.B) { benchSearchCode(b, fx, s.searcher, pull) })
	}
}

// BenchmarkSearchCodeRepositories weighs a one-repository search against
// the tenant's (issue 11: "a one-repository search costs no more than
// that repository's share"). The big tenant's five repositories are
// copies of one tree, so a search of each alone finds the same matches
// in the same order; what differs is where each copy's chunks fall among
// the span index's buckets (copy 1 starts a bucket, the others start
// mid-bucket), and so the parts a walk asks. Like for like, each case
// runs over all repositories from the start ("all"), over each
// repository alone ("repoN"), and over all repositories from that
// repository's first chunk ("tenant-from-repoN": the same stretch of
// chunks, the same layout, as a cursor at that chunk would search).
// BIGTENANT_DIV and BENCH_FIXTURE as above:
//
//	BIGTENANT_DIV=1 go test ./pkg/postgres -run '^$' -bench SearchCodeRepositories -benchtime 10x -timeout 60m
func BenchmarkSearchCodeRepositories(b *testing.B) {
	fx := codeBenchSetup(b)
	starts := make([]int64, len(fx.repos))
	for i, repo := range fx.repos {
		err := fx.env.Admin.InTenant(context.Background(), fx.tenant, func(tx *postgres.Tx) error {
			return postgres.Raw(tx).QueryRow(context.Background(), `SELECT min(id) FROM code_chunks WHERE tenant_id = $1 AND repository_id = $2`,
				fx.tenant, repo).Scan(&starts[i])
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range pgtest.SearchCodeQueries {
		switch tc.Name {
		case "rare-literal", "common-literal", "ci-text", "regex-handler", "very-common-err":
		default:
			continue
		}
		b.Run(tc.Name, func(b *testing.B) {
			b.Run("all", func(b *testing.B) { benchCodeCase(b, fx, codeindex.Searcher{}, nil, tc, codeindex.Pos{}) })
			for i := range fx.repos {
				one := tc
				one.Repo = i + 1
				b.Run(fmt.Sprintf("repo%d", i+1), func(b *testing.B) { benchCodeCase(b, fx, codeindex.Searcher{}, nil, one, codeindex.Pos{}) })
				b.Run(fmt.Sprintf("tenant-from-repo%d", i+1), func(b *testing.B) {
					benchCodeCase(b, fx, codeindex.Searcher{}, nil, tc, codeindex.Pos{Chunk: starts[i]})
				})
			}
		})
	}
}

// addBenchPull indexes the head of pull request 1 of the fixture's third
// repository: five changed files under net/http/ (ReplacePullIndex
// replaces them, so a held fixture may take it again).
func addBenchPull(tb testing.TB, fx *codeBenchFixture) *benchPull {
	tb.Helper()
	ctx := context.Background()
	var changed []codeindex.File
	for i, body := range []string{"package p\n\nfunc F(ctx context.Context) error { return nil }\n",
		"package p\n\n// deadline exceeded\n", "package p\n\nfunc (r *Reader) ReadRune() {}\n",
		"package p\n\nfunc okHandler(w http.ResponseWriter) {}\n", "package p\n\nvar ErrShortWrite = nil\n"} {
		changed = append(changed, codeindex.File{Path: fmt.Sprintf("net/http/pr%d.go", i), Size: int64(len(body)), Language: "Go", Lines: codeindex.SplitLines(body)})
	}
	pull := &benchPull{repo: fx.repos[2], number: 1}
	err := fx.env.App.InTenant(ctx, fx.tenant, func(tx *postgres.Tx) error {
		_, err := tx.ReplacePullIndex(ctx, pull.repo, pull.number, strings.Repeat("b", 40), strings.Repeat("a", 40), changed, nil)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return pull
}

// benchPull is a pull request whose head a benchmark searches at.
type benchPull struct {
	repo   int64
	number int
}

// benchSearchCode runs each case through search_code's engine; with a
// pull request, at its head instead (the cases over one repository are
// left out: every search at a head is).
func benchSearchCode(b *testing.B, fx *codeBenchFixture, searcher codeindex.Searcher, pull *benchPull) {
	for _, tc := range pgtest.SearchCodeQueries {
		if pull != nil && tc.Repo != 0 {
			continue
		}
		b.Run(tc.Name, func(b *testing.B) { benchCodeCase(b, fx, searcher, pull, tc, codeindex.Pos{}) })
	}
}

// benchCodeCase runs one case: its first page (page1) and the next one
// (page2, where there is one), each with p50, p90, the candidates the
// database returned (cands) and the rounds that asked for them (rounds).
// tc.Repo > 0 searches the fixture's tc.Repo-th repository alone; a
// non-zero from starts the first page there (as a cursor would).
func benchCodeCase(b *testing.B, fx *codeBenchFixture, searcher codeindex.Searcher, pull *benchPull, tc pgtest.SearchCodeQuery, from codeindex.Pos) {
	ctx := context.Background()
	plan, err := codeindex.NewPlan(tc.Query, tc.Regex, false)
	if err != nil {
		b.Fatal(err)
	}
	pf, err := codeindex.NewPathFilter(tc.Path)
	if err != nil {
		b.Fatal(err)
	}
	repos := fx.repos
	if tc.Repo > 0 {
		repos = fx.repos[tc.Repo-1 : tc.Repo]
	}
	if pull != nil {
		repos = []int64{pull.repo}
	}
	src := benchSource{db: fx.env.App.Tenant(fx.tenant), repos: repos, patterns: plan.LikePatterns(), regex: plan.Regex, prefix: pf.Prefix, pull: pull}
	q := codeindex.Query{Plan: plan, Path: pf, Limit: 20, Context: 2, Pull: pull != nil, From: from}
	first, err := searcher.Search(ctx, src, q)
	if err != nil {
		b.Fatal(err)
	}
	page := func(q codeindex.Query) func(b *testing.B) {
		return func(b *testing.B) {
			// The work a page is: the candidates the database
			// returned and the rounds that asked for them (the
			// same on every call), so that sizes whose pages hold
			// different numbers of candidates compare like for
			// like (a 1/10 tenant may end before a page is full).
			counted := &countingSource{Source: src}
			if _, err := searcher.Search(ctx, counted, q); err != nil {
				b.Fatal(err)
			}
			reportP50P90(b, func() {
				if _, err := searcher.Search(ctx, src, q); err != nil {
					b.Fatal(err)
				}
			})
			b.ReportMetric(float64(counted.candidates), "cands")
			b.ReportMetric(float64(counted.rounds), "rounds")
		}
	}
	b.Run("page1", page(q))
	// The next page, where there is one: the call an agent makes
	// after the first (search_code's cursor), which starts
	// mid-walk, from the first page's last match.
	if first.More || first.Truncated {
		q.From = first.Next
		b.Run("page2", page(q))
	}
}

// countingSource counts the rounds a search asks of its Source and the
// candidates they return.
type countingSource struct {
	codeindex.Source
	rounds, candidates int
}

func (s *countingSource) Candidates(ctx context.Context, phase int, after int64, limit int) ([]codeindex.Candidate, error) {
	c, err := s.Source.Candidates(ctx, phase, after, limit)
	s.rounds++
	s.candidates += len(c)
	return c, err
}

// benchSource is the candidate source search_code gives the engine
// (pkg/mcpserver's codeSource).
type benchSource struct {
	db       postgres.TenantDB
	repos    []int64
	patterns []string
	regex    string
	prefix   string
	pull     *benchPull // nil: none
}

func (s benchSource) Candidates(ctx context.Context, phase int, after int64, limit int) ([]codeindex.Candidate, error) {
	if s.pull != nil {
		return s.db.SearchPullCandidates(ctx, s.pull.repo, s.pull.number, phase, s.patterns, s.regex, s.prefix, after, limit)
	}
	return s.db.SearchCandidates(ctx, s.repos, s.patterns, s.regex, s.prefix, after, limit)
}

type codeBenchFixture struct {
	env    *pgtest.Env
	tenant string
	repos  []int64
}

// TestHoldCodeBenchFixture builds the big tenant's code fixture
// (codeBenchSetup, with BIGTENANT_DIV; and the pull request of
// BenchmarkSearchPullCodeBigTenant) and holds it, writing where it is to
// the file BENCH_HOLD names, until that file is removed (or the test's
// deadline nears); then it drops the database and roles as every test
// does. Meanwhile the code benchmarks run on it with BENCH_FIXTURE set to
// that file, in seconds instead of the minutes a fixture takes to build,
// and can alternate versions and sizes on the same data (the first
// sitting on a fixture read after another is often slower: compare
// interleaved rounds, not single runs). For example:
//
//	BIGTENANT_DIV=1 BENCH_HOLD=/tmp/full.json go test ./pkg/postgres -run TestHoldCodeBenchFixture -timeout 6h &
//	BIGTENANT_DIV=10 BENCH_HOLD=/tmp/tenth.json go test ./pkg/postgres -run TestHoldCodeBenchFixture -timeout 6h &
//	# (wait for both files)
//	for f in /tmp/tenth.json /tmp/full.json; do
//	  BENCH_FIXTURE=$f BENCH_SEARCH_SQL=/tmp/main.sql,/tmp/other.sql go test ./pkg/postgres -run '^$' -bench SearchCodeVariants -benchtime 20x
//	done
//	rm /tmp/full.json /tmp/tenth.json
//
// A variants run leaves the last version of policies/search.sql it applied
// in the held database.
func TestHoldCodeBenchFixture(t *testing.T) {
	t.Parallel()
	out := os.Getenv("BENCH_HOLD")
	if out == "" {
		t.Skip("BENCH_HOLD names no file to hold a fixture for")
	}
	if os.Getenv("BENCH_FIXTURE") != "" {
		t.Fatal("BENCH_HOLD and BENCH_FIXTURE are both set: a holder builds its own fixture")
	}
	fx := codeBenchSetup(t)
	addBenchPull(t, fx)
	body, err := json.Marshal(pgtest.Held{AdminURL: fx.env.AdminURL, AppURL: fx.env.AppURL, Tenant: fx.tenant, Repos: fx.repos, Roles: fx.env.Roles})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, body, 0o600); err != nil {
		t.Fatal(err)
	}
	// Leave a minute before the deadline, so that the database and roles
	// are dropped rather than left behind by a test that timed out.
	end, hasEnd := t.Deadline()
	for {
		if _, err := os.Stat(out); err != nil {
			return
		}
		if hasEnd && time.Until(end) < time.Minute {
			t.Logf("deadline near: dropping the fixture held in %s", out)
			os.Remove(out)
			return
		}
		time.Sleep(time.Second)
	}
}

// heldCodeBenchFixture attaches to the fixture BENCH_FIXTURE describes
// (TestHoldCodeBenchFixture), or returns nil when it is not set.
func heldCodeBenchFixture(tb testing.TB) *codeBenchFixture {
	env, h := pgtest.AttachHeld(tb)
	if env == nil {
		return nil
	}
	return &codeBenchFixture{env: env, tenant: h.Tenant, repos: h.Repos}
}

// codeBenchSetup indexes the tree once through ReplaceIndex (the ingestion
// path) and copies the index four times more in SQL (the same rows under
// new repository, file and chunk ids, in repository order as ReplaceIndex
// writes them), which is much faster than indexing five times. With
// BENCH_FIXTURE it attaches to a held fixture instead
// (TestHoldCodeBenchFixture; BIGTENANT_DIV is then the held one's).
func codeBenchSetup(b testing.TB) *codeBenchFixture {
	b.Helper()
	if fx := heldCodeBenchFixture(b); fx != nil {
		return fx
	}
	div := pgtest.Div(b)
	tree := pgtest.CodeTree(b)
	ctx := context.Background()
	start := time.Now()
	gd := filepath.Join(b.TempDir(), "git")
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A", "."}, {"commit", "-q", "-m", "bench"}} {
		cmd := exec.Command("git", append([]string{"--git-dir", gd, "--work-tree", tree}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.test",
			"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.test", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	snap, err := codeindex.ReadGit(ctx, gd, "HEAD")
	if err != nil {
		b.Fatal(err)
	}
	kept := snap.Files[:0]
	for i, f := range snap.Files {
		if i%div == 0 {
			kept = append(kept, f)
		}
	}
	snap.Files = kept

	env := pgtest.New(b)
	fx := &codeBenchFixture{env: env}
	tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "bigcode", Name: "Big code", MCPEnabled: true}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	fx.tenant = tn.ID
	err = env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
		for i := 0; i < 5; i++ {
			r, err := tx.AddRepository(ctx, postgres.NewRepository{FullName: fmt.Sprintf("bench/go%d", i)})
			if err != nil {
				return err
			}
			fx.repos = append(fx.repos, r.ID)
		}
		_, err := tx.ReplaceIndex(ctx, fx.repos[0], snap, postgres.Actor{Label: "bench"})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range fx.repos[1:] {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO code_files (tenant_id, repository_id, commit_sha, path, language, size, blob_sha, line_count, skip_reason)
			 SELECT tenant_id, $3, commit_sha, path, language, size, blob_sha, line_count, skip_reason
			 FROM code_files WHERE tenant_id = $1 AND repository_id = $2 ORDER BY id`, []any{tn.ID, fx.repos[0], r}},
			{
				`INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			 SELECT c.tenant_id, $3, nf.id, c.start_line, c.end_line, c.content
			 FROM code_chunks c JOIN code_files f ON f.tenant_id = c.tenant_id AND f.id = c.file_id
			 JOIN code_files nf ON nf.tenant_id = c.tenant_id AND nf.repository_id = $3 AND nf.path = f.path
			 WHERE c.tenant_id = $1 AND c.repository_id = $2 ORDER BY c.id`, []any{tn.ID, fx.repos[0], r}},
			{`UPDATE repositories SET indexed_commit = $2, indexed_at = now() WHERE tenant_id = $1 AND id = $3`, []any{tn.ID, snap.Commit, r}},
		} {
			if _, err := env.Admin.Pool.Exec(ctx, q.sql, q.args...); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The copies came in by SQL: the trigram estimates ReplaceIndex made
	// for the first are refreshed for all five, as indexing them would.
	if err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error { return tx.RefreshCodeStats(ctx, true) }); err != nil {
		b.Fatal(err)
	}
	if err := pgtest.Settle(ctx, env.Admin.Pool, "code_chunks", "code_files", "repositories", "code_trigram_stats"); err != nil {
		b.Fatal(err)
	}
	var chunks int
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM code_chunks`).Scan(&chunks); err != nil {
		b.Fatal(err)
	}
	b.Logf("indexed 5 copies of 1/%d of %s (%d files each, %d chunks) in %s", div, tree, len(snap.Files), chunks, time.Since(start).Round(time.Millisecond))
	return fx
}
