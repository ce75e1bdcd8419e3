package postgres_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// seedCode writes a synthetic code index: repos repositories of files
// files each (paths src/dir<k>/file<j>.go, one in ten doc/file<j>.go), two chunks per file, in repository
// order as ReplaceIndex writes them. Chunk text mixes a common word (about
// 40 % of chunks), a middling one (5 %) and a rare one (0.2 %).
func seedCode(t testing.TB, env *pgtest.Env, slug string, repos, files int) (tenant string, repoIDs []int64) {
	t.Helper()
	return seedCodeSpread(t, env, slug, repos, files, 0)
}

// spanBucket is the number of chunk ids in a bucket of
// code_chunks_tenant_span_trgm (id >> 13).
const spanBucket = 8192

// spanSub is the number of chunk ids in a sub-bucket of the span index
// (id >> 10, migration 0065).
const spanSub = 1024

// chunkIDsHigh is SQL for the highest chunk id any session has taken:
// sessions take ids in blocks (migration 0070), so a test that moves the
// sequence on (setval) starts above every block handed out, not from its
// own session's next id, which may lie below another session's block.
const chunkIDsHigh = `coalesce(pg_sequence_last_value(pg_get_serial_sequence('code_chunks', 'id')::regclass), 0)`

// seedCodeSpread is seedCode; with a spacing (in buckets; 0: none), each
// repository's chunks start 100 ids before a multiple of spacing buckets
// (the ids in between are never used), so that the repositories straddle
// bucket boundaries and the tenant spans many buckets (spacing 1: every
// bucket boundary of the tenant has chunks on both sides), and the chunks
// next to a bucket boundary (ids ≡ -2, -1, 0, 1 mod spanBucket) and every
// 97th chunk also contain "edge_marker()": a sparse pattern whose matches
// sit where the search hands over from one bucket, or span of buckets, to
// the next.
func seedCodeSpread(t testing.TB, env *pgtest.Env, slug string, repos, files, spacing int) (tenant string, repoIDs []int64) {
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
			if spacing > 0 {
				if _, err := postgres.Raw(tx).Exec(ctx, `SELECT setval(pg_get_serial_sequence('code_chunks', 'id'),
					((`+chunkIDsHigh+` + 1 + 101) / $1 + 1) * $1 - 101)`, spacing*spanBucket); err != nil {
					return err
				}
			}
			if _, err := postgres.Raw(tx).Exec(ctx, seedFilesSQL, tenant, id, files); err != nil {
				return err
			}
			if _, err := postgres.Raw(tx).Exec(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
				SELECT $1, $2, f.id, k * 40 + 1, k * 40 + 50, `+seedChunkContent(500)+`
				FROM code_files f CROSS JOIN generate_series(0, 1) k
				WHERE f.tenant_id = $1 AND f.repository_id = $2 ORDER BY f.path, k`, tenant, id); err != nil {
				return err
			}
		}
		if spacing > 0 {
			_, err := postgres.Raw(tx).Exec(ctx, `UPDATE code_chunks SET content = content || E'\nedge_marker()'
				WHERE tenant_id = $1 AND ((id + 2) % $2 < 4 OR id % 97 = 0)`, tenant, spanBucket)
			return err
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

// seedFilesSQL writes repository $2's files $3 of tenant $1, in path order:
// src/dir<j%10>/file<j>.go, and doc/file<j>.go for one in ten.
const seedFilesSQL = `INSERT INTO code_files (tenant_id, repository_id, commit_sha, path, language, size, blob_sha, line_count)
	SELECT $1, $2, 'c0ffee', CASE WHEN j % 10 = 9 THEN format('doc/file%s.go', j) ELSE format('src/dir%s/file%s.go', j % 10, j) END, 'Go', 100, md5(j::text), 90
	FROM generate_series(0, $3 - 1) j ORDER BY 4`

// seedChunkContent is the SQL of chunk k of file f's text: a common word
// in about 40 % of chunks, a middling one in 5 %, and needle_rare in one
// of rare.
func seedChunkContent(rare int) string {
	return fmt.Sprintf(`concat_ws(E'\n', 'package x', 'func f() {',
		CASE WHEN abs(hashint4(f.id::int * 2 + k)) %% 10 < 4 THEN 'x := Common(y)' END,
		CASE WHEN abs(hashint4(f.id::int * 3 + k)) %% 20 = 0 THEN 'z := MiddleWord()' END,
		CASE WHEN abs(hashint4(f.id::int * 5 + k)) %% %d = 0 THEN 'needle_rare()' END, '}')`, rare)
}

// seedCodeCluster is one repository over five full buckets from a bucket
// boundary B (and 100 ids before B, 140 after them: seedCodeSpread's
// spacing 1) whose matches of clu_marker() cluster as a package's do: 2 early in B's bucket, none in
// the next two, 40 in the first 3,900 ids of the fourth, in the fifth its
// first 10 ids, 101 further on and the first and last id of each of its
// sub-buckets; with trigram estimates that put the literal's trigrams in
// every chunk (the rest is never taken, and a bucket's candidates are
// dense). A page of 45 needs 3 ids of the fifth bucket, where the yield so
// far says about 2,900 ids and the fourth bucket's says 768: the walk asks
// for the fifth bucket's first sub-bucket only. A page of 55 needs 13:
// that sub-bucket holds 11 of them, its last id among them, and the next
// sub-bucket's first id is the 12th, so a step that ends a sub-bucket one
// id early or late repeats or skips one. boundary is B.
func seedCodeCluster(t testing.TB, env *pgtest.Env) (tenant string, repoIDs []int64, boundary int64) {
	t.Helper()
	tenant, repoIDs = seedCodeSpread(t, env, "cluster", 1, 20600, 1)
	var start int64
	if err := env.Admin.Pool.QueryRow(context.Background(), `SELECT min(id) FROM code_chunks WHERE tenant_id = $1`, tenant).Scan(&start); err != nil {
		t.Fatal(err)
	}
	if (start+100)%spanBucket != 0 {
		t.Fatalf("the clustered repository starts at %d, not 100 ids before a bucket boundary", start)
	}
	boundary = start + 100
	if _, err := env.Admin.Pool.Exec(context.Background(), `UPDATE code_chunks c SET content = c.content || E'\nclu_marker()'
		WHERE c.tenant_id = $1 AND (c.id - $2 IN (10, 20)
		   OR (c.id - $2 BETWEEN 3 * $3 AND 3 * $3 + 3900 AND (c.id - $2 - 3 * $3) % 100 = 0)
		   OR c.id - $2 BETWEEN 4 * $3 AND 4 * $3 + 9
		   OR c.id - $2 BETWEEN 4 * $3 + 5000 AND 4 * $3 + 5100
		   OR (c.id - $2 BETWEEN 4 * $3 AND 5 * $3 - 1 AND (c.id - $2) % $4 IN (0, $4 - 1)))`, tenant, boundary, spanBucket, spanSub); err != nil {
		t.Fatal(err)
	}
	forgeCodeStats(t, env, tenant, everyChunk(41200, "clu", "mar", "ark", "rke", "ker"))
	return tenant, repoIDs, boundary
}

// seedCodeThin seeds one repository of 4,000 chunks whose literal
// thin_marker is in 30 of its first 40 chunks and in its 3,901st: a page of
// 32 finds 30 in the first window and must walk on to the repository's
// end, past a long stretch with one match.
func seedCodeThin(t testing.TB, env *pgtest.Env) (tenant string, repoIDs []int64) {
	t.Helper()
	tenant, repoIDs = seedCodeSpread(t, env, "thin", 1, 2000, 0)
	if _, err := env.Admin.Pool.Exec(context.Background(), `UPDATE code_chunks c SET content = c.content || E'\nthin_marker()'
		FROM (SELECT min(id) AS start FROM code_chunks WHERE tenant_id = $1) s
		WHERE c.tenant_id = $1 AND (c.id - s.start < 40 AND (c.id - s.start) % 4 <> 3 OR c.id - s.start = 3900)`, tenant); err != nil {
		t.Fatal(err)
	}
	return tenant, repoIDs
}

// TestSearchCandidatesMatchesReference pages through search_code_candidates
// for every branch of its plan (few and many repositories, narrow and broad
// path prefixes, common, middling, rare and boundary patterns, small and
// large pages) and checks that the chunk ids are exactly, and in the order
// of, a plain reference.
func TestSearchCandidatesMatchesReference(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	tenant, repos := seedCode(t, env, "code", 12, 200) // 2,160 files under src/: a broad prefix has over 2,000
	checkCandidates(t, env, tenant, []repoSet{
		{"one repository", repos[5:6]}, {"three repositories", []int64{repos[9], repos[1], repos[4]}}, {"twelve repositories", repos},
	}, [][]string{{"common"}, {"middleword"}, {"needle_rare"}, {"middleword", "func f"}, {"nomatchatall"}, nil},
		[]string{"", "src/dir3/", "src/dir3/file13", "src/"}, []int{7, 200})
}

// TestSearchCandidatesHandoffs checks the hand-over between the phases of
// search_code_candidates (windows, buckets of the span index, the rest)
// against the reference, on repositories that straddle bucket boundaries
// and spread over many buckets, with pages of every small size (so that
// each step ends at many different places) and from every position around
// each bucket boundary: a step that skips or repeats the chunk at its
// border by even one id shows. On the packed tenant every bucket boundary
// has chunks, so every bucket step ends between two of them (its last two
// ids and the next bucket's first two all match edge_marker), and pages
// of several sizes from every position near every boundary end steps one
// bucket on, two, several.
//
// Under -short every branch, limit and position still runs, but a paged
// case stops after 40 pages (compared with the reference's first ones):
// the dense patterns with pages of one or two chunks were most of the
// time, and their first 40 pages already cross a repository's boundary.
func TestSearchCandidatesHandoffs(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	tenant, repos := seedCodeSpread(t, env, "spread", 12, 100, 3)
	// The spread tenant has trigram estimates (the index is asked with a
	// literal's rarest trigrams); the others have none (the whole literal).
	refreshCodeStats(t, env, tenant)
	many, manyRepos := seedCodeSpread(t, env, "many", 70, 5, 3) // more repositories than get per-repository windows
	packed, packedRepos := seedCodeSpread(t, env, "packed", 12, 100, 1)
	pages := 0
	if testing.Short() {
		pages = 40
	}
	sets := []repoSet{{"one repository", repos[4:5]}, {"two apart", []int64{repos[2], repos[9]}}, {"twelve repositories", repos}}
	pats := [][]string{{"edge_marker"}, {"common"}, {"middleword"}, {"needle_rare"}}
	checkCandidatesPages(t, env, tenant, sets, pats, []string{"", "src/"}, []int{1, 2, 3, 5, 8, 13, 32, 200}, pages)
	// Several literals, with the estimates: func f (in every chunk) is
	// left to the rows, in either order.
	multi := [][]string{{"needle_rare", "func f"}, {"func f", "needle_rare"}, {"middleword", "common"}, {"edge_marker", "func f", "common"}}
	checkCandidatesPages(t, env, tenant, sets, multi, []string{"", "src/"}, []int{1, 3, 8, 32, 200}, pages)
	checkCandidatesPages(t, env, many, []repoSet{{"seventy repositories", manyRepos}, {"sixty-nine", manyRepos[1:]}}, pats, []string{""}, []int{1, 3, 32, 200}, pages)
	dense, denseRepos := seedCode(t, env, "dense", 70, 8) // id-range windows back to back
	checkCandidatesPages(t, env, dense, []repoSet{{"seventy dense repositories", denseRepos}, {"every other", everyOther(denseRepos)}}, pats[1:], []string{""}, []int{1, 2, 3, 5, 8, 32}, pages)
	packedSets := []repoSet{{"twelve packed repositories", packedRepos}, {"packed two apart", []int64{packedRepos[1], packedRepos[7]}}}
	checkCandidatesPages(t, env, packed, packedSets, [][]string{{"edge_marker"}, {"needle_rare"}}, []string{""}, []int{1, 3, 8, 32, 200}, pages)

	checkAroundBoundaries(t, env, tenant, sets, pats, []int{3}, false, spanBucket)
	checkAroundBoundaries(t, env, packed, packedSets, [][]string{{"edge_marker"}, {"needle_rare"}}, []int{1, 3, 8, 32}, true, spanBucket)

	// Trigram estimates that call every literal common make the walk go
	// on bucket by bucket where the yield alone would take the rest at
	// once: the same answers.
	common, commonRepos := seedCodeSpread(t, env, "common", 12, 100, 1)
	forgeCodeStats(t, env, common, everyChunk(100000, "nee", "eed", "edl", "dle", "rar", "are", "edg", "dge", "mar", "ark", "rke", "ker"))
	commonSets := []repoSet{{"twelve packed repositories, common estimates", commonRepos}, {"two apart, common estimates", []int64{commonRepos[1], commonRepos[7]}}}
	checkCandidatesPages(t, env, common, commonSets, [][]string{{"edge_marker"}, {"needle_rare"}}, []string{""}, []int{1, 3, 32}, pages)
	checkAroundBoundaries(t, env, common, commonSets, [][]string{{"needle_rare"}}, []int{1, 8}, true, spanBucket)

	// Matches that thin out after the first window (buckets after an
	// empty window): the same answers.
	thin, thinRepos := seedCodeThin(t, env)
	checkCandidatesPages(t, env, thin, []repoSet{{"one thinning repository", thinRepos}}, [][]string{{"thin_marker"}}, []string{""}, []int{1, 3, 8, 29, 30, 31, 32, 200}, 0)

	// Matches that cluster, in dense buckets: the walk asks for a part of
	// a bucket (a sub-bucket, migration 0065) where the last bucket's
	// yield says the page ends soon; the same answers, from every
	// position around each sub-bucket boundary too.
	cluster, clusterRepos, _ := seedCodeCluster(t, env)
	clusterSets := []repoSet{{"one clustered repository", clusterRepos}}
	checkCandidatesPages(t, env, cluster, clusterSets, [][]string{{"clu_marker"}}, []string{""}, []int{1, 3, 8, 13, 45, 55, 200}, 0)
	// Its 18,540 files under src/ are more than search_code_candidates
	// reads the spans of (10,000): the walk goes over the repository and
	// checks the prefix on the rows; src/dir3/ (2,060 files) walks its
	// runs.
	checkCandidatesPages(t, env, cluster, clusterSets, [][]string{{"clu_marker"}, {"middleword"}}, []string{"src/", "src/dir3/"}, []int{3, 45, 200}, pages)
	checkAroundBoundaries(t, env, cluster, clusterSets, [][]string{{"clu_marker"}}, []int{3, 45, 55}, true, spanSub)
}

// checkAroundBoundaries asks for one page from every position from 3
// before to 3 after each boundary of span ids (a bucket's, spanBucket, or
// a sub-bucket's, spanSub), for every set, pattern and limit
// (with regex, a single pattern also as a regex alone), and compares it
// with the reference.
func checkAroundBoundaries(t *testing.T, env *pgtest.Env, tenant string, sets []repoSet, pats [][]string, limits []int, regex bool, span int64) {
	t.Helper()
	ctx := context.Background()
	all := referenceChunks(t, env, tenant)
	for _, set := range sets {
		for _, pat := range pats {
			want := matching(all, set.ids, pat, "")
			filters := filtersFor(t, pat)
			if !regex {
				filters = filters[:1]
			}
			for _, c := range all {
				if (c.id+3)%span > 6 {
					continue
				}
				after := c.id
				i, _ := slices.BinarySearch(want, after+1)
				for _, limit := range limits {
					next := want[i:min(len(want), i+limit)]
					for _, f := range filters {
						cands, err := env.App.Tenant(tenant).SearchCandidates(ctx, set.ids, f.likes, f.regex, "", after, limit)
						if err != nil {
							t.Fatal(err)
						}
						var got []int64
						for _, c := range cands {
							got = append(got, c.ChunkID)
						}
						if !slices.Equal(got, next) {
							t.Errorf("%s/%v/regex=%q after %d, limit %d: got %v, want %v", set.name, pat, f.regex, after, limit, head(got), head(next))
						}
					}
				}
			}
		}
	}
}

func everyOther(ids []int64) []int64 {
	var out []int64
	for i := 0; i < len(ids); i += 2 {
		out = append(out, ids[i])
	}
	return out
}

type repoSet struct {
	name string
	ids  []int64
}

type refChunk struct {
	id, repo int64
	path     string
	content  string
}

// referenceChunks reads every chunk of the tenant with its path, content
// lowered, in id order, as the administrator.
func referenceChunks(t *testing.T, env *pgtest.Env, tenant string) []refChunk {
	t.Helper()
	ctx := context.Background()
	var all []refChunk
	err := env.Admin.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		rows, err := postgres.Raw(tx).Query(ctx, `SELECT c.id, c.repository_id, f.path, lower(c.content) FROM code_chunks c JOIN code_files f ON f.tenant_id = c.tenant_id AND f.id = c.file_id
			WHERE c.tenant_id = $1 ORDER BY c.id`, tenant)
		if err != nil {
			return err
		}
		all, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (refChunk, error) {
			var c refChunk
			return c, r.Scan(&c.id, &c.repo, &c.path, &c.content)
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// matching is the reference: the ids of the chunks of repos under prefix
// that contain every pattern, in id order.
func matching(all []refChunk, repos []int64, pats []string, prefix string) []int64 {
	var want []int64
	for _, c := range all {
		ok := slices.Contains(repos, c.repo) && strings.HasPrefix(c.path, prefix)
		for _, p := range pats {
			ok = ok && strings.Contains(c.content, p)
		}
		if ok {
			want = append(want, c.id)
		}
	}
	return want
}

func likes(pats []string) []string {
	like := make([]string, len(pats))
	for i, p := range pats {
		like[i] = "%" + codeindex.EscapeLike(p) + "%"
	}
	return like
}

// literalARE is the regex prefilter of a case-insensitive regular
// expression that is the literal p: it selects what ILIKE '%p%' does, so
// a one-pattern case also runs with the regex alone (no ILIKE pattern)
// through every phase.
func literalARE(t *testing.T, p string) string {
	t.Helper()
	re, err := syntax.Parse("(?i)"+regexp.QuoteMeta(p), syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	are, _, ok := codeindex.ARE(re)
	if !ok {
		t.Fatalf("no ARE for %q", p)
	}
	return are
}

// filter is how a case is given to search_code_candidates: ILIKE
// patterns, or a regex alone.
type filter struct {
	likes []string
	regex string
}

// filtersFor gives pats as ILIKE patterns and, when there is one, also as
// a regex alone (the same chunks).
func filtersFor(t *testing.T, pats []string) []filter {
	t.Helper()
	filters := []filter{{likes: likes(pats)}}
	if len(pats) == 1 {
		filters = append(filters, filter{regex: literalARE(t, pats[0])})
	}
	return filters
}

// checkCandidates pages through search_code_candidates for every
// combination and compares the ids with the reference; a single pattern
// is also given as a regex alone.
func checkCandidates(t *testing.T, env *pgtest.Env, tenant string, sets []repoSet, pats [][]string, prefixes []string, limits []int) {
	t.Helper()
	checkCandidatesPages(t, env, tenant, sets, pats, prefixes, limits, 0)
}

// checkCandidatesPages is checkCandidates; with pages > 0 each case stops
// after that many pages and is compared with as much of the reference.
func checkCandidatesPages(t *testing.T, env *pgtest.Env, tenant string, sets []repoSet, pats [][]string, prefixes []string, limits []int, pages int) {
	t.Helper()
	all := referenceChunks(t, env, tenant)
	for _, set := range sets {
		for _, pat := range pats {
			filters := filtersFor(t, pat)
			for _, prefix := range prefixes {
				if pat == nil && prefix == "" && len(set.ids) > 1 {
					continue // refused before the database unless scoped to a repository
				}
				want := matching(all, set.ids, pat, prefix)
				for _, limit := range limits {
					for _, f := range filters {
						name := fmt.Sprintf("%s/%v/regex=%q/prefix=%q/limit=%d", set.name, pat, f.regex, prefix, limit)
						got, done := pageCandidates(t, env.App.Tenant(tenant), set.ids, f, prefix, limit, pages)
						want := want
						if !done {
							want = want[:min(len(want), len(got))]
						}
						if !slices.Equal(got, want) {
							t.Errorf("%s: got %d chunks, want %d (got %v…, want %v…)", name, len(got), len(want), head(got), head(want))
						}
					}
				}
			}
		}
	}
}

// TestSearchCandidatesChecksAsILIKE: a pattern without wildcards is
// checked on the rows with strpos over the lowered content, which must
// select exactly what its ILIKE under the "C" collation does (the
// contract, and what the trigram index's recheck applies): mixed case,
// escaped %, _ and backslash, the wildcard _ (left to ILIKE), and letters
// beyond ASCII, which neither folds. Every branch that checks rows runs:
// windows, buckets and the rest (the spread tenant, with estimates, so
// the index is asked with the rarest trigrams and the rows checked), and
// the narrow path prefix's slices; regular expressions too (their
// literals and ARE in one expression), against ILIKE and ~ themselves.
func TestSearchCandidatesChecksAsILIKE(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	tenant, repos := seedCodeSpread(t, env, "ilike", 12, 100, 3)
	lines := []string{"Deadline Exceeded", "DEADLINE exceeded now", "deadline_exceeded", "deadlineXexceeded",
		`deadline%exceeded`, `back\slash`, "Äpfel und Birnen", "äpfel", "ÄPFEL", "ſtraße"}
	if _, err := env.Admin.Pool.Exec(ctx, `UPDATE code_chunks c SET content = c.content || E'\n' || ($2::text[])[1 + c.id % array_length($2::text[], 1)]
		WHERE c.tenant_id = $1 AND c.id % 7 = 0`, tenant, lines); err != nil {
		t.Fatal(err)
	}
	refreshCodeStats(t, env, tenant)
	// Patterns alone, then regular expressions: their literals' checks
	// and the ARE in one expression. A regular expression must select
	// something, so that its case checks the ARE at all.
	type checkCase struct {
		name      string
		f         filter
		mustMatch bool
	}
	var cases []checkCase
	for _, pat := range []string{`%deadline exceeded%`, `%DEADLINE EXCEEDED%`, `%deadline\_exceeded%`, `%deadline_exceeded%`,
		`%deadline\%exceeded%`, `%back\\slash%`, `%äpfel%`, `%ÄPFEL%`, `%Äpfel und%`, `%ſtraße%`, `%STRASSE%`, `%exceeded%`} {
		cases = append(cases, checkCase{pat, filter{likes: []string{pat}}, false})
	}
	for _, query := range []string{`deadline.exceeded`, `(?-i)Deadline Exceeded`, `DEADLINE\s+exceeded\b`, `äpfel|Äpfel und`} {
		plan, err := codeindex.NewPlan(query, true, false)
		if err != nil || plan.Regex == "" {
			t.Fatalf("NewPlan(%q): regex %q, %v", query, plan.Regex, err)
		}
		cases = append(cases, checkCase{"regex " + query, filter{likes: plan.LikePatterns(), regex: plan.Regex}, true})
	}
	for _, prefix := range []string{"", "src/dir3/"} {
		for _, c := range cases {
			var want []int64
			err := env.Admin.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
				rows, err := postgres.Raw(tx).Query(ctx, `SELECT c.id FROM code_chunks c JOIN code_files f ON f.tenant_id = c.tenant_id AND f.id = c.file_id
					WHERE c.tenant_id = $1 AND f.path LIKE $3 || '%' AND ($4::text IS NULL OR c.content ~ $4 COLLATE "C")
					  AND NOT EXISTS (SELECT 1 FROM unnest($2::text[]) p WHERE NOT c.content ILIKE p COLLATE "C") ORDER BY c.id`,
					tenant, c.f.likes, prefix, postgres.NullIfEmpty(c.f.regex))
				if err != nil {
					return err
				}
				want, err = pgx.CollectRows(rows, pgx.RowTo[int64])
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if c.mustMatch && len(want) == 0 && prefix == "" {
				t.Fatalf("%s selects no chunk: the case checks nothing", c.name)
			}
			for _, limit := range []int{3, 200} {
				got, _ := pageCandidates(t, env.App.Tenant(tenant), repos, c.f, prefix, limit, 0)
				if !slices.Equal(got, want) {
					t.Errorf("%s (%v, %q) prefix %q limit %d: got %d chunks %v…, want %d %v… (ILIKE and ~)", c.name, c.f.likes, c.f.regex, prefix, limit, len(got), head(got), len(want), head(want))
				}
			}
		}
	}
}

// pageCandidates pages through search_code_candidates from the start,
// limit chunks a page, and returns the ids; with pages > 0 it stops after
// that many pages (done reports whether it reached the end).
func pageCandidates(t *testing.T, db postgres.TenantDB, repos []int64, f filter, prefix string, limit, pages int) (ids []int64, done bool) {
	t.Helper()
	after := int64(0)
	for page := 0; page < 5000; page++ {
		if pages > 0 && page == pages {
			return ids, false
		}
		cands, err := db.SearchCandidates(context.Background(), repos, f.likes, f.regex, prefix, after, limit)
		if err != nil {
			t.Fatalf("%v/regex=%q/prefix=%q/limit=%d: %v", f.likes, f.regex, prefix, limit, err)
		}
		for _, c := range cands {
			ids = append(ids, c.ChunkID)
			after = c.ChunkID
		}
		if len(cands) < limit {
			return ids, true
		}
	}
	return ids, true
}

// TestSearchCandidatesStaysInItsTenant calls search_code_candidates, as the
// runtime role, with another tenant's repository ids in every branch of its
// plan: it returns nothing.
func TestSearchCandidatesStaysInItsTenant(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a, aRepos := seedCode(t, env, "alpha", 2, 20)
	b, bRepos := seedCodeSpread(t, env, "bravo", 10, 20, 3) // over many buckets: every phase runs
	_, cRepos := seedCode(t, env, "charlie", 70, 2)         // more repositories than get per-repository windows
	// The control: as its own tenant, bravo finds chunks with the regex.
	const otherRegex = "(?n)(?:func|needle_rare|MiddleWord|edge_marker)"
	if cands, err := env.App.Tenant(b).SearchCandidates(ctx, bRepos, nil, otherRegex, "", 0, 100); err != nil || len(cands) == 0 {
		t.Fatalf("bravo's own search with the regex: %d candidates, %v", len(cands), err)
	}
	for _, tc := range []struct {
		repos    []int64
		patterns []string
		prefix   string
	}{
		{bRepos[:1], []string{"%func%"}, ""},
		{bRepos[:1], []string{`%needle\_rare%`}, ""}, // one repository alone: its walk ends before any bucket (v_end is read by tenant)
		{bRepos, []string{"%func%"}, ""},
		{bRepos, []string{"%middleword%"}, ""},
		{bRepos, []string{`%edge\_marker%`}, ""},
		{bRepos, []string{`%needle\_rare%`}, ""},
		{bRepos, []string{"%func%"}, "src/dir1/"},
		{bRepos, []string{"%func%"}, "src/"},
		{bRepos, nil, "src/dir1/"},
		{bRepos[:1], nil, ""},
		{cRepos, []string{"%func%"}, ""},
		{cRepos, []string{`%needle\_rare%`}, ""},
	} {
		// Each also with a regex prefilter that matches the other
		// tenant's chunks (alone when there are no patterns).
		for _, regex := range []string{"", otherRegex} {
			for _, limit := range []int{1, 100} {
				cands, err := env.App.Tenant(a).SearchCandidates(ctx, tc.repos, tc.patterns, regex, tc.prefix, 0, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(cands) != 0 {
					t.Errorf("tenant alpha with another tenant's repositories %v, %v, regex %q, %q: %d candidates", tc.repos, tc.patterns, regex, tc.prefix, len(cands))
				}
			}
		}
	}
	// Alpha's and bravo's chunks side by side in one bucket and its
	// sub-buckets (one session takes one block of ids, migration 0070;
	// blocks of two tenants meet inside a bucket the same way): a part
	// is asked with its own key, not the tenant's, so the tenant checked
	// on its rows is what keeps bravo's out when bravo's repository ids
	// are passed too. With that check removed the count below fails:
	// bravo's ids take places in the page, and the rows' final fetch
	// (by tenant) drops them, so the repository check cannot see them.
	var shared [2]int
	if err := pgx.BeginFunc(ctx, env.Admin.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('code_chunks', 'id'), ((`+chunkIDsHigh+` + 1) / $1 + 1) * $1)`, spanBucket); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			SELECT c.tenant_id, c.repository_id, c.file_id, c.start_line + 1000, c.end_line + 1000, c.content || E'\nshared_marker()'
			FROM (SELECT c.*, row_number() OVER (PARTITION BY c.tenant_id ORDER BY c.id) AS n FROM code_chunks c
			      WHERE c.repository_id IN ($1, $2)) c
			ORDER BY c.n, c.tenant_id = $3`, aRepos[0], bRepos[0], a)
		shared[0] = int(tag.RowsAffected())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM code_chunks WHERE repository_id = $1 AND content LIKE '%shared_marker%'`, aRepos[0]).Scan(&shared[1]); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{1, 7, 5000} {
		cands, err := env.App.Tenant(a).SearchCandidates(ctx, append(slices.Clone(aRepos), bRepos...), []string{`%shared\_marker%`}, "", "", 0, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cands {
			if !slices.Contains(aRepos, c.RepositoryID) {
				t.Errorf("tenant alpha, a bucket shared with bravo, limit %d: candidate %d of repository %d", limit, c.ChunkID, c.RepositoryID)
			}
		}
		if want := min(limit, shared[1]); len(cands) != want {
			t.Errorf("tenant alpha, a bucket shared with bravo, limit %d: %d candidates, want %d (of %d chunks written)", limit, len(cands), want, shared[0])
		}
	}
	// Alpha's own repositories among the others': only alpha's chunks,
	// under a path prefix too (its files' spans, migration 0066, are read
	// by tenant).
	mixed := append(append(slices.Clone(aRepos), bRepos...), cRepos...)
	for _, pats := range [][]string{{"%func%"}, {"%middleword%"}, {`%needle\_rare%`}} {
		for _, prefix := range []string{"", "src/"} {
			cands, err := env.App.Tenant(a).SearchCandidates(ctx, mixed, pats, "", prefix, 0, 5000)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cands {
				if !slices.Contains(aRepos, c.RepositoryID) {
					t.Errorf("tenant alpha, %v, %q: candidate %d of repository %d", pats, prefix, c.ChunkID, c.RepositoryID)
				}
			}
		}
	}
}

// TestSearchCandidatesPlans asserts, on seeded data and as the runtime role,
// which index each branch of search_code_candidates reads, so that a later
// change cannot silently fall back to reading every chunk, or to the trigram
// index over the whole tenant when a bucket would do.
func TestSearchCandidatesPlans(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	tenant, repos := seedCode(t, env, "code", 12, 200)
	spread, spreadRepos := seedCodeSpread(t, env, "spread", 12, 100, 3)
	many, manyRepos := seedCode(t, env, "many", 70, 5)
	// The spread tenant has its real trigram estimates (needle_rare is
	// rare); in the dense one they say it has 100,000 chunks and the
	// trigrams are in every one, so that the rest of the tenant would hold
	// too many candidates to be rechecked at once.
	refreshCodeStats(t, env, spread)
	dense, denseRepos := seedCodeSpread(t, env, "dense", 12, 100, 3)
	forgeCodeStats(t, env, dense, everyChunk(100000, "nee", "eed", "edl", "dle", "rar", "are"))
	// One repository over six or seven buckets: its 200 chunks, then
	// five copies of them, each from the next bucket on.
	lone, loneRepos := seedCodeSpread(t, env, "lone", 1, 100, 0)
	for i := 0; i < 5; i++ {
		// One session: the setval resets its block of ids (migration
		// 0070), and its insert then takes ids from there.
		if err := pgx.BeginFunc(context.Background(), env.Admin.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(context.Background(), `SELECT setval(pg_get_serial_sequence('code_chunks', 'id'),
				((`+chunkIDsHigh+` + 1) / $1 + 1) * $1)`, spanBucket); err != nil {
				return err
			}
			_, err := tx.Exec(context.Background(), `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
				SELECT tenant_id, repository_id, file_id, start_line + 1000, end_line + 1000, content FROM code_chunks
				WHERE tenant_id = $1 AND id < (SELECT min(id) FROM code_chunks WHERE tenant_id = $1) + 200 ORDER BY id`, lone)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	deep, deepRepos := seedCodeSpread(t, env, "deep", 12, 100, 3)
	forgeCodeStats(t, env, deep, everyChunk(9000, "nee", "eed", "edl", "dle", "rar", "are"))
	yield, yieldRepos := seedCodeSpread(t, env, "yield", 12, 100, 3)
	if _, err := env.Admin.Pool.Exec(context.Background(), `UPDATE code_chunks c SET content = c.content || E'\nmid_marker()'
		FROM (SELECT id, row_number() OVER (PARTITION BY repository_id ORDER BY id) AS n FROM code_chunks WHERE tenant_id = $1) r
		WHERE c.tenant_id = $1 AND c.id = r.id AND r.n BETWEEN 151 AND 154`, yield); err != nil {
		t.Fatal(err)
	}
	conn, plans := explainConn(t, env)
	q := `SELECT chunk_id FROM search_code_candidates($1, $2, $3, 0, 32, $4)`
	const (
		bucket        = "(id >> 13) = "                   // the span index restricted to one bucket
		whole         = "::uuid) AND (content ~~* '%"     // the span index over the tenant's rest
		wholeRegex    = "::uuid) AND (content ~ '"        // the same, for a regex with no literal (its ARE alone)
		repoKey       = "AND (repository_id = '"          // the span index asked with one repository
		tenantBucket  = "::uuid) AND ((id >> 13) = "      // ... and with the tenant (a part no longer is)
		bucketOnly    = "Index Cond: (((id >> 13) = "     // ... with the bucket's key first, no tenant's
		subBucketOnly = "Index Cond: (((id >> 10) = "     // a sub-bucket, with its key first, no bucket's or tenant's
		tenantOnRows  = "(COALESCE(tenant_id, '"          // the tenant checked on the rows only
		repoRest      = "Index Cond: ((repository_id = '" // the span index over one repository's rest
	)
	rare := []string{`%needle\_rare%`}
	for _, tc := range []struct {
		name     string
		tenant   string
		repos    []int64
		patterns []string
		prefix   string
		// regex: a regular-expression query whose plan (its literals and
		// its ARE, case-insensitive) replaces patterns.
		regex string
		want  []string
		never []string
	}{
		{"common literal, one repository: windows", tenant, repos[2:3], []string{"%common%"}, "", "", []string{"code_chunks_tenant_repo_id"}, []string{"Seq Scan on code_chunks", "code_chunks_tenant_span_trgm", "code_trigram_stats"}},
		{"common literal, many repositories: id-range windows", many, manyRepos, []string{"%common%"}, "", "", []string{"code_chunks_pkey"}, []string{"Seq Scan on code_chunks", "code_chunks_tenant_span_trgm", "code_trigram_stats"}},
		// A bucket is asked with its key alone, the tenant checked on the
		// rows (fails with the tenant's key back).
		{"rare literal: buckets", tenant, repos[:3], rare, "", "", []string{"code_chunks_tenant_span_trgm", bucketOnly, tenantOnRows}, []string{"Seq Scan on code_chunks", whole, repoKey, tenantBucket}},
		{"rare literal, twelve repositories: buckets", tenant, repos, rare, "", "", []string{"code_chunks_tenant_span_trgm", bucket}, []string{"Seq Scan on code_chunks", whole}},
		// One repository: the index is asked with its key, not the
		// tenant's (the bucket holds only its candidates).
		{"rare literal, one repository: buckets of its own", tenant, repos[2:3], rare, "", "", []string{"code_chunks_tenant_span_trgm", bucket, repoKey, tenantOnRows}, []string{"Seq Scan on code_chunks", whole, tenantBucket}},
		{"rare literal, one repository of a spread tenant: its own key", spread, spreadRepos[1:2], rare, "", "", []string{"code_chunks_tenant_span_trgm", repoKey}, []string{"Seq Scan on code_chunks", whole, tenantBucket}},
		{"rare literal over many buckets: the rest at once", spread, spreadRepos, rare, "", "", []string{"code_chunks_tenant_span_trgm", whole}, []string{"Seq Scan on code_chunks"}},
		{"sparse matches of common trigrams over many buckets: buckets, never the rest", dense, denseRepos, rare, "", "", []string{"code_chunks_tenant_span_trgm", bucket}, []string{"Seq Scan on code_chunks", whole}},
		// The same: the estimates say the rest will not be chosen, and the
		// repositories are all of the tenant's, so a step asks its further
		// parts in one statement.
		{"sparse matches of common trigrams: further parts in one statement", dense, denseRepos, rare, "", "", []string{"code_chunks_tenant_span_trgm", bucket, "WITH RECURSIVE"}, []string{"Seq Scan on code_chunks", whole}},
		// But over a few of the tenant's repositories, not all of them
		// (eleven of its twelve), one part a step: a walk would recheck
		// the other repositories' candidates between them (fails with
		// the rule removed: the step walks).
		{"sparse matches of common trigrams, a few of the repositories: one part a step", dense, denseRepos[:11], rare, "", "", []string{"code_chunks_tenant_span_trgm", bucket}, []string{"Seq Scan on code_chunks", whole, "WITH RECURSIVE"}},
		// With estimates the index is asked with the literal's three
		// rarest trigrams (needle's first three: rare alike, the earliest
		// win), and the whole literal checks the rows.
		{"a literal's rarest trigrams ask the index, the literal checks", spread, spreadRepos, rare, "", "",
			[]string{"AND (content ~~* '%needl%'::text COLLATE \"C\"))", `Filter: (strpos(lower((COALESCE(content, ''::text))::text), 'needle_rare'::text) > 0)`},
			[]string{"Seq Scan on code_chunks", "~~* '%needle"}},
		// A pattern with a wildcard (a rune the case-insensitive search
		// widens) is checked with its ILIKE; one without, with strpos.
		{"a pattern with a wildcard is checked with its ILIKE", spread, spreadRepos, []string{`%needle_rare%`}, "", "",
			[]string{"AND (content ~~* '%needl%'::text COLLATE \"C\"))", `Filter: (COALESCE(content, ''::text) ~~* '%needle_rare%'::text COLLATE "C")`},
			[]string{"Seq Scan on code_chunks", "strpos("}},
		// Of two patterns, one in every chunk (func f, by the real
		// estimates) is checked on the rows only.
		{"a pattern in every chunk is left to the rows", spread, spreadRepos, []string{`%needle\_rare%`, `%func f%`}, "", "",
			[]string{"AND (content ~~* '%needl%'::text COLLATE \"C\"))", `(strpos(lower((COALESCE(content, ''::text))::text), 'func f'::text) > 0)`},
			[]string{"Seq Scan on code_chunks", `'%needl%'::text COLLATE "C") AND (content ~~* '%func f%'`}},
		{"a pattern in every chunk is left to the rows, first or last", spread, spreadRepos, []string{`%func f%`, `%needle\_rare%`}, "", "",
			[]string{"AND (content ~~* '%needl%'::text COLLATE \"C\"))", `(strpos(lower((COALESCE(content, ''::text))::text), 'func f'::text) > 0)`},
			[]string{"Seq Scan on code_chunks", `(content ~~* '%func f%'::text COLLATE "C") AND (content ~~* '%needl%'`}},
		// (Its files' spans are read first, from the path index alone:
		// migration 0066's covering index.)
		{"narrow path prefix: the chunk ids from the files index alone", tenant, repos, []string{"%middleword%"}, "src/dir3/", "", []string{"Index Only Scan using code_files_tenant_path", "Index Only Scan using code_chunks_tenant_file"}, []string{"Seq Scan on code_chunks", "Seq Scan on code_files"}},
		// A broad prefix (the seed's 12 repositories hold 2,160 files
		// under src/): its runs of chunk ids from its files' spans
		// (migration 0066; read by the path index or, where the prefix
		// holds most files, the repositories'), then windows in the runs
		// by primary key, or the span index's buckets for a rare literal;
		// never every file, nor each file's chunks.
		// The seed writes each repository's files in one stretch of ids,
		// so the runs are summed up per repository, and no file's span is
		// merged one by one (TestSearchCandidatesRunsInterleaved has the
		// other way).
		{"broad path prefix: the runs from the path index, windows in them", tenant, repos, []string{"%common%"}, "src/", "", []string{"code_files_tenant_", "Function Scan on i", runsPerRepo}, []string{"Seq Scan on code_chunks", "Seq Scan on code_files", "code_chunks_tenant_file", runsPerFile}},
		{"broad path prefix, rare literal: the runs' buckets", tenant, repos, rare, "src/", "", []string{"code_files_tenant_", "code_chunks_tenant_span_trgm", bucket}, []string{"Seq Scan on code_chunks", "Seq Scan on code_files", "code_chunks_tenant_file", whole}},
		// One repository of 100 files: its files by the repository's
		// index or by the path's, as the planner's statistics of the day
		// say; never every file.
		{"no pattern", tenant, repos[:1], nil, "src/dir3/", "", []string{"on code_files_tenant_"}, []string{"Seq Scan on code_chunks", "Seq Scan on code_files"}},
		{"no pattern, no prefix", tenant, repos[:1], nil, "", "", []string{"code_chunks_tenant_repo_id"}, []string{"Seq Scan on code_chunks"}},
		// A regex's ARE is a predicate of every phase, and the trigram
		// index takes it (pg_trgm extracts trigrams from it).
		{"rare alternation, no literal: buckets", tenant, repos[:3], nil, "", `(needle_rare\(\)|nomatchatall)`, []string{"code_chunks_tenant_span_trgm", bucket}, []string{"Seq Scan on code_chunks", wholeRegex}},
		{"rare regex over many buckets: the rest at once, the literal before the ARE", spread, spreadRepos, nil, "", `needle_\w+\(\)`,
			[]string{"code_chunks_tenant_span_trgm", whole, `Filter: CASE WHEN (strpos(lower((COALESCE(content, ''::text))::text), 'needle_'::text) > 0) THEN (COALESCE(content, ''::text) ~ '(?n)`},
			[]string{"Seq Scan on code_chunks"}},
		{"rare alternation over many buckets: the rest at once", spread, spreadRepos, nil, "", `(needle_rare|nomatchatall)\(`, []string{"code_chunks_tenant_span_trgm", wholeRegex}, []string{"Seq Scan on code_chunks"}},
		// One repository asks the index with its own key for its rest as
		// well (the rest is the repository's, so it is taken with fewer
		// buckets left than a tenant's).
		{"rare literal, one repository over six buckets: the rest of its own", lone, loneRepos, rare, "", "", []string{"code_chunks_tenant_span_trgm", repoKey, repoRest, tenantOnRows}, []string{"Seq Scan on code_chunks", whole, tenantBucket}},
		// Past the first buckets, the yield says the page ends well
		// before the tenant does (mid_marker: four chunks in the middle of
		// each of the twelve repositories; 32 of them need eight): bucket by
		// bucket, never the rest at once, whose candidates would all be
		// rechecked, most of them past the page (a regex with no literal
		// has no estimate to bound them).
		{"sparse alternation, the page within the yield's reach: buckets, never the rest", yield, yieldRepos, nil, "", `(mid_marker|nomatchatall)\(`, []string{"code_chunks_tenant_span_trgm", bucket}, []string{"Seq Scan on code_chunks", wholeRegex}},
		// The ARE (about 7 us a chunk) runs only on rows that hold the
		// literals: one expression, which the planner cannot reorder by
		// its cost estimate (it counts the strpos check as three
		// operators and the ARE as one, and ran the ARE first).
		{"common regex, one repository: windows, the literal before the ARE", tenant, repos[2:3], nil, "", `Common\(\w+\)`,
			[]string{"code_chunks_tenant_repo_id", `Filter: CASE WHEN (strpos(lower((COALESCE(content, ''::text))::text), 'common('::text) > 0) THEN (COALESCE(content, ''::text) ~ '(?n)`},
			[]string{"Seq Scan on code_chunks", "code_chunks_tenant_span_trgm"}},
		{"regex, narrow path prefix", tenant, repos, nil, "src/dir3/", `Middle(Word|Name)\(`, []string{"code_files_tenant_path", "code_chunks_tenant_file"}, []string{"Seq Scan on code_chunks", "Seq Scan on code_files"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patterns := tc.patterns
			if patterns == nil {
				patterns = []string{}
			}
			var regex any // NULL
			if tc.regex != "" {
				plan, err := codeindex.NewPlan(tc.regex, true, false)
				if err != nil || plan.Regex == "" {
					t.Fatalf("NewPlan(%q): regex %q, %v", tc.regex, plan.Regex, err)
				}
				patterns, regex = plan.LikePatterns(), plan.Regex
			}
			all := planOf(t, conn, plans, tc.tenant, q, tc.repos, patterns, tc.prefix, regex)
			// Through the trigram index a regex alone must be an index
			// condition (pg_trgm narrows the bitmap with it); with
			// literals the index is asked with their rarest trigrams and
			// the regex checks its rows; elsewhere it is a filter.
			if tc.regex != "" && !appliesRegex(all, slices.Contains(tc.want, "code_chunks_tenant_span_trgm") && len(patterns) == 0) {
				t.Errorf("the plan does not apply the regex:\n%s", all)
			}
			if os.Getenv("SHOW_PLANS") != "" {
				t.Log(all)
			}
			assertPlan(t, all, tc.want, tc.never)
		})
	}
	// A deep page: the rest query rechecks its scope's candidates before
	// the position too (its ids are bounded after the recheck), so the
	// estimate that bounds it counts them. Here they say 9,000 of the
	// tenant's chunks hold the literal; about two fifths lie after the
	// position (the last five of twelve repositories), which alone would
	// pass the bound of 4,096.
	t.Run("deep page, the rest's whole scope too common: buckets, never the rest", func(t *testing.T) {
		var after int64
		if err := env.Admin.Pool.QueryRow(context.Background(), `SELECT min(id) - 1 FROM code_chunks WHERE tenant_id = $1 AND repository_id = $2`,
			deep, deepRepos[7]).Scan(&after); err != nil {
			t.Fatal(err)
		}
		all := planOf(t, conn, plans, deep, `SELECT chunk_id FROM search_code_candidates($1, $2, '', $3, 32)`, deepRepos, rare, after)
		if os.Getenv("SHOW_PLANS") != "" {
			t.Log(all)
		}
		assertPlan(t, all, []string{"code_chunks_tenant_span_trgm", bucket}, []string{"Seq Scan on code_chunks", whole})
	})
	// Matches that thin out: the first window holds 30 of a page of 32,
	// the next match lies 3,800 chunks on. After a window that holds
	// none the walk asks the index, never window after window (each
	// checks every chunk it holds) because the walk's average still says
	// the page ends within the next few chunks: the old rule asked about
	// 120 windows of 32 chunks here, and at full size a continuation of
	// func \w+Handler\( asked 14 windows of 1,300 chunks (100-250 ms).
	t.Run("matches that thin out after the first window: buckets, not window after window", func(t *testing.T) {
		thin, thinRepos := seedCodeThin(t, env)
		all := planOf(t, conn, plans, thin, `SELECT chunk_id FROM search_code_candidates($1, $2, '', 0, 32)`, thinRepos, []string{`%thin\_marker%`})
		if os.Getenv("SHOW_PLANS") != "" {
			t.Log(all)
		}
		if n := strings.Count(all, "WITH w AS MATERIALIZED"); n > 3 {
			t.Errorf("%d windows; want at most 3 (the first, one more on its yield, then the index)", n)
		}
		assertPlan(t, all, []string{"code_chunks_tenant_span_trgm", bucket}, []string{"Seq Scan on code_chunks"})
	})
	// Dense clustered matches (seedCodeCluster; a database of its own:
	// its 20,600 files would move the planner's statistics of code_files
	// under the cases above), where the walk asks the index for one
	// sub-bucket (its key as an index condition, not a filter of the
	// bucket's rows), never the whole bucket, so that the rest of the
	// bucket's candidates are never rechecked.
	t.Run("dense clustered matches", func(t *testing.T) {
		cenv := pgtest.New(t)
		cluster, clusterRepos, clusterStart := seedCodeCluster(t, cenv)
		cconn, cplans := stepsExplainConn(t, cenv)
		fifth := clusterStart + 4*spanBucket
		for _, tc := range []struct {
			name  string
			after int64
			limit int
			sub   int64  // the first id of the sub-bucket asked for
			which string // which of the fifth bucket's sub-buckets that is
			walk  bool   // a step asks several buckets in one statement
		}{
			// After a dense bucket the page needs 3 ids, which the next
			// bucket's first sub-bucket holds (its first 10 ids match, 101
			// more further on).
			// After the first sparse bucket, the next one and the dense one
			// are asked in one statement, which stops after the dense one
			// (the page then needs less than half of what it needed).
			{"clustered matches, a few ids left: one sub-bucket, not the whole bucket", 0, 45, fifth, "first", true},
			// A position in the last sub-bucket of a dense bucket, where the
			// first window finds nothing (no prediction of the page's end):
			// the bucket's candidates before the position (every chunk's, by
			// the estimates) would all be rechecked for nothing. (The old
			// rule asked for a sub-bucket only past a predicted end, so it
			// asked the bucket.)
			{"a position late in a dense bucket: its sub-bucket, not the candidates before it", fifth + 7*spanSub + 100, 5, fifth + 7*spanSub, "last", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				all := planOf(t, cconn, cplans, cluster, `SELECT chunk_id FROM search_code_candidates($1, $2, '', $3, $4)`,
					clusterRepos, []string{`%clu\_marker%`}, tc.after, tc.limit)
				if os.Getenv("SHOW_PLANS") != "" {
					t.Log(all)
				}
				steps := stepsAsked(t, all)
				subAsked := false
				for _, st := range steps {
					if st.sub && st.first == tc.sub/spanSub {
						subAsked = true
					}
					if !st.sub && st.first <= fifth/spanBucket && fifth/spanBucket <= st.last {
						t.Errorf("the fifth bucket (%d) was asked whole (buckets %d to %d)", fifth/spanBucket, st.first, st.last)
					}
				}
				if tc.walk && !slices.ContainsFunc(steps, func(st stepAsked) bool { return st.last > st.first }) {
					t.Errorf("no step asks several buckets in one statement; steps %+v", steps)
				}
				if !subAsked {
					t.Errorf("no step asks for the fifth bucket's %s sub-bucket %d first; steps %+v:\n%s", tc.which, tc.sub/spanSub, steps, all)
				}
				assertPlan(t, all, []string{"code_chunks_tenant_span_trgm", "(c.id >> 13) = ", "(c.id >> 10) = "},
					[]string{"Seq Scan on code_chunks", whole})
			})
		}
	})
	// A few matches early, then none over many buckets, of a literal the
	// estimates call rare: the yield soon predicts a page's end beyond
	// the walk's, and the rest at once is taken. Until then each step
	// asks one bucket, never several in one statement: the rest can
	// still be chosen after any of them (with several buckets a step,
	// the walk asked up to eight buckets the rest then asked again).
	t.Run("early matches, then none: one bucket a step until the rest", func(t *testing.T) {
		env := pgtest.New(t)
		early, earlyRepos := seedCodeSpread(t, env, "early", 12, 100, 3)
		if _, err := env.Admin.Pool.Exec(context.Background(), `UPDATE code_chunks c SET content = c.content || E'\nearly_marker()'
			FROM (SELECT min(id) AS start FROM code_chunks WHERE tenant_id = $1) s
			WHERE c.tenant_id = $1 AND c.id - s.start IN (3, 7, 11)`, early); err != nil {
			t.Fatal(err)
		}
		refreshCodeStats(t, env, early)
		conn, plans := explainConn(t, env)
		all := planOf(t, conn, plans, early, `SELECT chunk_id FROM search_code_candidates($1, $2, '', 0, 32)`, earlyRepos, []string{`%early\_marker%`})
		if os.Getenv("SHOW_PLANS") != "" {
			t.Log(all)
		}
		assertPlan(t, all, []string{"code_chunks_tenant_span_trgm", bucket, whole}, []string{"WITH RECURSIVE", "Seq Scan on code_chunks"})
	})
	// Sparse matches (one chunk in 20) of trigrams the estimates put in
	// one chunk in 20: the first window (64 chunks) holds 4 of a page of
	// 32, so the yield says 560 more chunks. Checking them all would cost
	// several times what the index's candidates for their ids cost: the
	// walk asks the index and checks no second window. (The old rule
	// checked a window of 560 chunks.)
	t.Run("sparse matches: the index, not a large window", func(t *testing.T) {
		env := pgtest.New(t)
		sparse, sparseRepos := seedCodeSpread(t, env, "sparse", 1, 2000, 0)
		if _, err := env.Admin.Pool.Exec(context.Background(), `UPDATE code_chunks c SET content = c.content || E'\nsparse_marker()'
			FROM (SELECT min(id) AS start FROM code_chunks WHERE tenant_id = $1) s
			WHERE c.tenant_id = $1 AND (c.id - s.start) % 20 = 0`, sparse); err != nil {
			t.Fatal(err)
		}
		est := map[string]int64{"": 4000}
		for _, g := range []string{"spa", "par", "ars", "rse", "mar", "ark", "rke", "ker"} {
			est[g] = 200
		}
		forgeCodeStats(t, env, sparse, est)
		conn, plans := explainConn(t, env)
		all := planOf(t, conn, plans, sparse, `SELECT chunk_id FROM search_code_candidates($1, $2, '', 0, 32)`, sparseRepos, []string{`%sparse\_marker%`})
		if os.Getenv("SHOW_PLANS") != "" {
			t.Log(all)
		}
		if n := strings.Count(all, "WITH w AS MATERIALIZED"); n != 1 {
			t.Errorf("%d windows; want 1 (the first, then the index)", n)
		}
		// (The rows' fetch by primary key at the end may be a sequential
		// scan of this database's 4,000 chunks, the planner's choice;
		// the search's steps are what is asserted.)
		// The page's predicted end lies in the first sub-bucket, which is
		// asked with its own key and the repository's, not its bucket's.
		assertPlan(t, all, []string{"code_chunks_tenant_span_trgm", subBucketOnly}, []string{whole, bucket})
	})
	// A sparse literal under a prefix whose chunks are four runs of ids
	// (one per repository, a bucket apart), with no prediction of the
	// page's end (no match yet): one walk asks the sub-buckets of every
	// run left, not a step per run (fails with the walk kept in the
	// run). The candidates are the reference's, at every page size.
	t.Run("sparse literal under a prefix of several runs: one walk across them", func(t *testing.T) {
		env := pgtest.New(t)
		runs, runsRepos := seedCodeSpread(t, env, "runs", 4, 600, 1)
		forgeCodeStats(t, env, runs, everyChunk(100000, "nee", "eed", "edl", "dle", "rar", "are"))
		conn, plans := stepsExplainConn(t, env)
		all := planOf(t, conn, plans, runs, `SELECT chunk_id FROM search_code_candidates($1, $2, 'src/', 0, 32)`, runsRepos, rare)
		if os.Getenv("SHOW_PLANS") != "" {
			t.Log(all)
		}
		var los, his []int64
		if err := env.Admin.Pool.QueryRow(context.Background(), `SELECT array_agg(lo ORDER BY lo), array_agg(hi ORDER BY lo) FROM (
			SELECT min(chunk_lo) AS lo, max(chunk_hi) AS hi FROM code_files WHERE tenant_id = $1 GROUP BY repository_id) r`, runs).Scan(&los, &his); err != nil {
			t.Fatal(err)
		}
		// The run a sub-bucket lies in (-1: none).
		runOf := func(sub int64) int {
			for i := range los {
				if los[i]/spanSub <= sub && sub <= his[i]/spanSub {
					return i
				}
			}
			return -1
		}
		if !slices.ContainsFunc(stepsAsked(t, all), func(st stepAsked) bool { return st.sub && runOf(st.last) > runOf(st.first) }) {
			t.Errorf("no walk of sub-buckets goes on into the next run; runs from %v to %v, steps %+v", los, his, stepsAsked(t, all))
		}
		checkCandidates(t, env, runs, []repoSet{{"four repositories", runsRepos}}, [][]string{{"needle_rare"}, {"common"}}, []string{"src/", "src/dir1/"}, []int{1, 7, 32, 200})
	})
}

// stepsExplainConn is explainConn with verbose plans and row counts, which
// show the parts a step asked for (stepsAsked); the settings are the
// administrator's.
func stepsExplainConn(t *testing.T, env *pgtest.Env) (*pgx.Conn, *[]string) {
	t.Helper()
	conn, plans := explainConn(t, env)
	for _, q := range []string{"RESET ROLE", "SET auto_explain.log_verbose = on", "SET auto_explain.log_analyze = on",
		"SET auto_explain.log_timing = off", "SET ROLE " + pgx.Identifier{env.Roles.App}.Sanitize()} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	return conn, plans
}

// stepAsked is one bucket step of search_code_candidates as a verbose,
// analyzed plan shows it: the parts it asked for, first to last, and
// whether they were sub-buckets (else whole buckets).
type stepAsked struct {
	first, last int64
	sub         bool
}

var (
	stepStart     = regexp.MustCompile(`Output: 0, 0, '\{\}'::bigint\[\]`)
	stepParts     = regexp.MustCompile(`Index Cond: .*\(\(c\.id >> 1[03]\) = \('\{([\d,]+)\}'::bigint\[\]\)\[`)
	stepRows      = regexp.MustCompile(`Recursive Union .*\(actual rows=(\d+) loops=1\)`)
	stepBucket    = regexp.MustCompile(`Index Cond: .*\(\(c\.id >> 13\) = '(\d+)'::bigint\)`)
	stepSubBucket = regexp.MustCompile(`Index Cond: .*\(\(c\.id >> 10\) = '(\d+)'::bigint\)`)
	// A part's index condition that names the tenant (a part's ids say
	// which rows; the tenant is checked on them).
	partTenantKey = regexp.MustCompile(`Index Cond: \(\(c\.tenant_id = .*\(c\.id >> 1[03]\)`)
)

// stepsAsked lists the bucket steps of plan (auto_explain with
// log_verbose and log_analyze): a step of one part asks its bucket or
// sub-bucket as a constant; a step of several parts is a recursive walk
// over an array of parts (a constant of its index condition) from a seed
// row, one row per part asked.
func stepsAsked(t *testing.T, plan string) []stepAsked {
	t.Helper()
	var out []stepAsked
	for _, stmt := range strings.Split(plan, "Query Text: ")[1:] {
		if strings.HasPrefix(stmt, "WITH s AS MATERIALIZED (") {
			b, sb := stepBucket.FindStringSubmatch(stmt), stepSubBucket.FindStringSubmatch(stmt)
			switch {
			case b != nil && sb != nil:
				t.Errorf("a sub-bucket is asked with its bucket's key too:\n%s", stmt)
			case sb != nil:
				k, _ := strconv.ParseInt(sb[1], 10, 64)
				out = append(out, stepAsked{first: k, last: k, sub: true})
			case b != nil:
				k, _ := strconv.ParseInt(b[1], 10, 64)
				out = append(out, stepAsked{first: k, last: k})
			}
			if (b != nil || sb != nil) && partTenantKey.MatchString(stmt) {
				t.Errorf("a part is asked with the tenant's key:\n%s", stmt)
			}
			continue
		}
		if !strings.HasPrefix(stmt, "WITH RECURSIVE w(i, n, ids)") {
			continue
		}
		start, rows, parts := stepStart.FindStringSubmatch(stmt), stepRows.FindStringSubmatch(stmt), stepParts.FindStringSubmatch(stmt)
		if start == nil || rows == nil || parts == nil {
			t.Fatalf("a bucket step without its seed, its row count or its parts:\n%s", stmt)
		}
		// Each part is asked through the span index (as the runtime
		// role: the walk's parts are its parameters, not constants).
		if !strings.Contains(stmt, "Bitmap Index Scan on code_chunks_tenant_span_trgm") || strings.Contains(stmt, "Seq Scan on public.code_chunks") {
			t.Errorf("a bucket step of several parts does not ask the span index:\n%s", stmt)
		}
		var ks []int64
		for _, p := range strings.Split(parts[1], ",") {
			k, _ := strconv.ParseInt(p, 10, 64)
			ks = append(ks, k)
		}
		n, _ := strconv.Atoi(rows[1])
		if n < 2 || n-1 > len(ks) || !slices.IsSorted(ks) {
			t.Fatalf("a bucket step of %d rows over parts %v:\n%s", n, ks, stmt)
		}
		sub := strings.Contains(stmt, "((c.id >> 10) = (")
		if partTenantKey.MatchString(stmt) || sub && strings.Contains(stmt, "((c.id >> 13) = (") {
			t.Errorf("a walk's part is asked with the tenant's key or its bucket's as well as its own:\n%s", stmt)
		}
		out = append(out, stepAsked{first: ks[0], last: ks[n-2], sub: sub})
	}
	return out
}

// appliesRegex reports whether a plan has an index condition (or, unless
// index, a filter) that applies a regex (content ~ '…').
func appliesRegex(plan string, index bool) bool {
	if hasIndexCond(plan, "(content ~ '(?n)") {
		return true
	}
	for _, l := range strings.Split(plan, "\n") {
		if !index && strings.Contains(l, "Filter:") &&
			(strings.Contains(l, "(content ~ '(?n)") || strings.Contains(l, "(COALESCE(content, ''::text) ~ '(?n)")) {
			return true
		}
	}
	return false
}

// hasIndexCond reports whether one of a plan's index conditions contains
// cond.
func hasIndexCond(plan, cond string) bool {
	for _, l := range strings.Split(plan, "\n") {
		if strings.Contains(l, "Index Cond:") && strings.Contains(l, cond) {
			return true
		}
	}
	return false
}
