package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// seedCodeInterleaved writes three repositories with the same paths whose
// chunks were written interleaved (file by file, each repository's chunk
// in turn, as concurrent indexings would), so that a file's span of chunk
// ids (code_files.chunk_lo, chunk_hi; migration 0066) holds the other
// repositories' chunks of that path. Then, more than a bucket of ids later,
// every seventh file of the first repository under src/dir2/ and src/dir5/
// is written anew (a redaction: its chunks deleted and inserted at the end
// of the id order), and the second chunk of every eleventh file of the
// first repository is deleted. The first repository's runs under src/ are
// then its first stretch and a few late fragments, with the other
// repositories' chunks in between.
func seedCodeInterleaved(t *testing.T, env *pgtest.Env) (tenant string, repoIDs []int64) {
	t.Helper()
	ctx := context.Background()
	if err := env.Admin.Pool.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('interleaved', 'interleaved') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	content := `concat_ws(E'\n', 'package x', 'func f() {',
		CASE WHEN abs(hashint4(f.id::int * 2 + k)) % 10 < 4 THEN 'x := Common(y)' END,
		CASE WHEN abs(hashint4(f.id::int * 3 + k)) % 20 = 0 THEN 'z := MiddleWord()' END,
		CASE WHEN abs(hashint4(f.id::int * 5 + k)) % 50 = 0 THEN 'needle_rare()' END, '}')`
	err := env.Admin.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		q := postgres.Raw(tx)
		for r := 0; r < 3; r++ {
			var id int64
			if err := q.QueryRow(ctx, `INSERT INTO repositories (tenant_id, full_name, indexed_commit, indexed_at) VALUES ($1, $2, 'c0ffee', now()) RETURNING id`,
				tenant, fmt.Sprintf("org/interleaved-%d", r)).Scan(&id); err != nil {
				return err
			}
			repoIDs = append(repoIDs, id)
			if _, err := q.Exec(ctx, `INSERT INTO code_files (tenant_id, repository_id, commit_sha, path, language, size, blob_sha, line_count)
				SELECT $1, $2, 'c0ffee', CASE WHEN j % 10 = 9 THEN format('doc/file%s.go', j) ELSE format('src/dir%s/file%s.go', j % 10, j) END, 'Go', 100, md5(j::text), 90
				FROM generate_series(0, 599) j ORDER BY 4`, tenant, id); err != nil {
				return err
			}
		}
		if _, err := q.Exec(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			SELECT $1, f.repository_id, f.id, k * 40 + 1, k * 40 + 50, `+content+`
			FROM code_files f CROSS JOIN generate_series(0, 1) k
			WHERE f.tenant_id = $1 ORDER BY f.path, k, f.repository_id`, tenant); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `SELECT setval(pg_get_serial_sequence('code_chunks', 'id'), nextval(pg_get_serial_sequence('code_chunks', 'id')) + 10000)`); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `CREATE TEMP TABLE moved ON COMMIT DROP AS
			SELECT c.file_id, c.start_line, c.end_line, c.content FROM code_chunks c JOIN code_files f ON f.tenant_id = c.tenant_id AND f.id = c.file_id
			WHERE c.tenant_id = $1 AND f.repository_id = $2 AND (f.path LIKE 'src/dir2/%' OR f.path LIKE 'src/dir5/%') AND f.id % 7 = 0`, tenant, repoIDs[0]); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `DELETE FROM code_chunks c USING moved m WHERE c.tenant_id = $1 AND c.file_id = m.file_id`, tenant); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			SELECT $1, $2, m.file_id, m.start_line, m.end_line, m.content FROM moved m ORDER BY m.file_id, m.start_line`, tenant, repoIDs[0]); err != nil {
			return err
		}
		_, err := q.Exec(ctx, `DELETE FROM code_chunks c USING code_files f
			WHERE c.tenant_id = $1 AND f.tenant_id = $1 AND f.id = c.file_id AND f.repository_id = $2 AND f.id % 11 = 0 AND c.start_line > 1`, tenant, repoIDs[0])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"code_chunks", "code_files"} {
		if _, err := env.Admin.Pool.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
			t.Fatal(err)
		}
	}
	return tenant, repoIDs
}

// TestCodeFileSpans: the triggers of migration 0066 keep every file's
// chunk_lo and chunk_hi the lowest and highest id of its chunks (NULL
// without chunks) through interleaved inserts, a redaction's delete and
// insert, deletes of some of a file's chunks and of a whole file's, and
// ReplaceIndex and ReplaceStoredFile as the runtime role.
func TestCodeFileSpans(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	tenant, repos := seedCodeInterleaved(t, env)
	var moved int
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM code_files f WHERE f.tenant_id = $1 AND f.chunk_lo > (SELECT min(id) FROM code_chunks) + 10000`, tenant).Scan(&moved); err != nil {
		t.Fatal(err)
	}
	if moved == 0 {
		t.Fatal("no file's chunks were written anew at the end: the seed does not fragment the runs")
	}
	checkSpans(t, env, tenant)

	// The runtime role's own writes: a repository indexed (files then
	// chunks) and a stored file rewritten, and a file deleted with its
	// chunks by a cascade.
	err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		files, err := tx.StoredFiles(ctx, 0, 5)
		if err != nil {
			return err
		}
		for _, f := range files {
			if f.Lines == nil {
				continue
			}
			f.Lines = append(f.Lines, "// rewritten")
			if err := tx.ReplaceStoredFile(ctx, f); err != nil {
				return err
			}
		}
		_, err = postgres.Raw(tx).Exec(ctx, `DELETE FROM code_files WHERE tenant_id = $1 AND repository_id = $2 AND path LIKE 'src/dir1/%'`, tenant, repos[1])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checkSpans(t, env, tenant)
}

// checkSpans compares every file's span with its chunks, as the
// administrator.
func checkSpans(t *testing.T, env *pgtest.Env, tenant string) {
	t.Helper()
	var bad, files int
	err := env.Admin.Pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE f.chunk_lo IS DISTINCT FROM s.lo OR f.chunk_hi IS DISTINCT FROM s.hi), count(*)
		FROM code_files f LEFT JOIN LATERAL (SELECT min(c.id) AS lo, max(c.id) AS hi FROM code_chunks c WHERE c.tenant_id = f.tenant_id AND c.file_id = f.id) s ON true
		WHERE f.tenant_id = $1`, tenant).Scan(&bad, &files)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 || files == 0 {
		t.Fatalf("%d of %d files have a span other than their chunks' ids", bad, files)
	}
}

// TestSearchCandidatesRunsInterleaved pages through search_code_candidates
// under path prefixes whose chunks lie in runs of ids shared with other
// repositories' chunks of the same paths (the walk in the runs of the
// prefix's spans): the answers are exactly the reference's, and never a
// chunk of a repository the caller was not given, although its path is
// under the prefix and its id inside a run.
func TestSearchCandidatesRunsInterleaved(t *testing.T) {
	env := pgtest.New(t)
	tenant, repos := seedCodeInterleaved(t, env)
	refreshCodeStats(t, env, tenant)
	sets := []repoSet{{"the first of three", repos[:1]}, {"the second", repos[1:2]}, {"the first and third", []int64{repos[0], repos[2]}}}
	pages := 0
	if testing.Short() {
		pages = 40 // as TestSearchCandidatesHandoffs
	}
	checkCandidatesPages(t, env, tenant, sets, [][]string{{"common"}, {"middleword"}, {"needle_rare"}, {"nomatchatall"}},
		[]string{"src/", "src/dir2/", "src/dir5/file1"}, []int{1, 3, 8, 32, 200}, pages)
}
