package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// seedCode writes a synthetic code index: repos repositories of files
// files each (paths src/dir<k>/file<j>.go, one in ten doc/file<j>.go), two chunks per file, in repository
// order as ReplaceIndex writes them. Chunk text mixes a common word (about
// 40 % of chunks), a middling one (5 %) and a rare one (0.2 %).
func seedCode(t testing.TB, env *pgtest.Env, slug string, repos, files int) (tenant string, repoIDs []int64) {
	t.Helper()
	ctx := context.Background()
	err := env.Admin.Pool.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&tenant)
	if err != nil {
		t.Fatal(err)
	}
	err = env.Admin.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		for r := 0; r < repos; r++ {
			var id int64
			if err := postgres.Raw(tx).QueryRow(ctx, `INSERT INTO repositories (tenant_id, full_name, indexed_commit, indexed_at) VALUES ($1, $2, 'c0ffee', now()) RETURNING id`,
				tenant, fmt.Sprintf("org/%s-%02d", slug, r)).Scan(&id); err != nil {
				return err
			}
			repoIDs = append(repoIDs, id)
			if _, err := postgres.Raw(tx).Exec(ctx, `INSERT INTO code_files (tenant_id, repository_id, commit_sha, path, language, size, blob_sha, line_count)
				SELECT $1, $2, 'c0ffee', CASE WHEN j % 10 = 9 THEN format('doc/file%s.go', j) ELSE format('src/dir%s/file%s.go', j % 10, j) END, 'Go', 100, md5(j::text), 90
				FROM generate_series(0, $3 - 1) j ORDER BY 4`, tenant, id, files); err != nil {
				return err
			}
			if _, err := postgres.Raw(tx).Exec(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
				SELECT $1, $2, f.id, k * 40 + 1, k * 40 + 50,
				       concat_ws(E'\n', 'package x', 'func f() {',
				           CASE WHEN abs(hashint4(f.id::int * 2 + k)) % 10 < 4 THEN 'x := Common(y)' END,
				           CASE WHEN abs(hashint4(f.id::int * 3 + k)) % 20 = 0 THEN 'z := MiddleWord()' END,
				           CASE WHEN abs(hashint4(f.id::int * 5 + k)) % 500 = 0 THEN 'needle_rare()' END, '}')
				FROM code_files f CROSS JOIN generate_series(0, 1) k
				WHERE f.tenant_id = $1 AND f.repository_id = $2 ORDER BY f.path, k`, tenant, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.Pool.Exec(ctx, "VACUUM ANALYZE code_chunks"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.Pool.Exec(ctx, "VACUUM ANALYZE code_files"); err != nil {
		t.Fatal(err)
	}
	return tenant, repoIDs
}

// TestSearchCandidatesMatchesReference pages through search_code_candidates
// for every branch of its plan (few and many repositories, narrow and broad
// path prefixes, common and rare patterns, small and large pages) and checks
// that the chunk ids are exactly, and in the order of, a plain reference.
func TestSearchCandidatesMatchesReference(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	tenant, repos := seedCode(t, env, "code", 12, 200) // 2,160 files under src/: a broad prefix has over 2,000

	type chunk struct {
		id, repo int64
		path     string
		content  string
	}
	var all []chunk
	err := env.Admin.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		rows, err := postgres.Raw(tx).Query(ctx, `SELECT c.id, c.repository_id, f.path, lower(c.content) FROM code_chunks c JOIN code_files f ON f.tenant_id = c.tenant_id AND f.id = c.file_id
			WHERE c.tenant_id = $1 ORDER BY c.id`, tenant)
		if err != nil {
			return err
		}
		all, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (chunk, error) {
			var c chunk
			return c, r.Scan(&c.id, &c.repo, &c.path, &c.content)
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, repoSet := range []struct {
		name string
		ids  []int64
	}{{"one repository", repos[5:6]}, {"three repositories", []int64{repos[9], repos[1], repos[4]}}, {"twelve repositories", repos}} {
		for _, pats := range [][]string{{"common"}, {"middleword"}, {"needle_rare"}, {"middleword", "func f"}, {"nomatchatall"}, nil} {
			for _, prefix := range []string{"", "src/dir3/", "src/dir3/file13", "src/"} {
				if pats == nil && prefix == "" && len(repoSet.ids) > 1 {
					continue // refused before the database unless scoped to a repository
				}
				for _, limit := range []int{7, 200} {
					name := fmt.Sprintf("%s/%v/prefix=%q/limit=%d", repoSet.name, pats, prefix, limit)
					var want []int64
					for _, c := range all {
						ok := slices.Contains(repoSet.ids, c.repo) && strings.HasPrefix(c.path, prefix)
						for _, p := range pats {
							ok = ok && strings.Contains(c.content, p)
						}
						if ok {
							want = append(want, c.id)
						}
					}
					like := make([]string, len(pats))
					for i, p := range pats {
						like[i] = "%" + p + "%"
					}
					var got []int64
					after := int64(0)
					for page := 0; page < 2000; page++ {
						cands, err := env.App.Tenant(tenant).SearchCandidates(ctx, repoSet.ids, like, prefix, after, limit)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						for _, c := range cands {
							got = append(got, c.ChunkID)
							after = c.ChunkID
						}
						if len(cands) < limit {
							break
						}
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s: got %d chunks, want %d (got %v…, want %v…)", name, len(got), len(want), head(got), head(want))
					}
				}
			}
		}
	}
}

// TestSearchCandidatesStaysInItsTenant calls search_code_candidates, as the
// runtime role, with another tenant's repository ids in every branch of its
// plan: it returns nothing.
func TestSearchCandidatesStaysInItsTenant(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	a, _ := seedCode(t, env, "alpha", 2, 20)
	_, bRepos := seedCode(t, env, "bravo", 10, 20)
	for _, tc := range []struct {
		repos    []int64
		patterns []string
		prefix   string
	}{
		{bRepos[:1], []string{"%func%"}, ""},
		{bRepos, []string{"%func%"}, ""},
		{bRepos, []string{"%func%"}, "src/dir1/"},
		{bRepos, nil, "src/dir1/"},
	} {
		cands, err := env.App.Tenant(a).SearchCandidates(ctx, tc.repos, tc.patterns, tc.prefix, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(cands) != 0 {
			t.Errorf("tenant alpha with bravo's repositories %v, %v, %q: %d candidates", tc.repos, tc.patterns, tc.prefix, len(cands))
		}
	}
}

// TestSearchCandidatesPlans asserts, on seeded data and as the runtime role,
// which index each branch of search_code_candidates reads, so that a later
// change cannot silently fall back to reading every chunk.
func TestSearchCandidatesPlans(t *testing.T) {
	env := pgtest.New(t)
	tenant, repos := seedCode(t, env, "code", 12, 200)
	conn, plans := explainConn(t, env)
	q := `SELECT chunk_id FROM search_code_candidates($1, $2, $3, 0, 32)`
	for _, tc := range []struct {
		name     string
		repos    []int64
		patterns []string
		prefix   string
		want     []string
		never    []string
	}{
		{"common literal, one repository", repos[2:3], []string{"%common%"}, "", []string{"code_chunks_tenant_repo_id"}, []string{"Seq Scan on code_chunks", "code_chunks_tenant_content_trgm"}},
		{"common literal, many repositories", repos, []string{"%common%"}, "", []string{"code_chunks_pkey"}, []string{"Seq Scan on code_chunks", "code_chunks_tenant_content_trgm"}},
		{"rare literal", repos[:3], []string{"%needle_rare%"}, "", []string{"code_chunks_tenant_content_trgm"}, []string{"Seq Scan on code_chunks"}},
		{"narrow path prefix", repos, []string{"%middleword%"}, "src/dir3/", []string{"code_files_tenant_path", "code_chunks_tenant_file"}, []string{"Seq Scan on code_chunks", "Seq Scan on code_files"}},
		{"no pattern", repos[:1], nil, "src/dir3/", []string{"code_files_tenant_path"}, []string{"Seq Scan on code_chunks", "Seq Scan on code_files"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patterns := tc.patterns
			if patterns == nil {
				patterns = []string{}
			}
			all := planOf(t, conn, plans, tenant, q, tc.repos, patterns, tc.prefix)
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("plan does not use %s:\n%s", w, all)
				}
			}
			for _, n := range tc.never {
				if strings.Contains(all, n) {
					t.Errorf("plan contains %q:\n%s", n, all)
				}
			}
		})
	}
}
