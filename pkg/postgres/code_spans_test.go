package postgres_test

import (
	"context"
	"fmt"
	"strings"
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
// is written anew (as a redaction does: its chunks deleted, its span
// cleared, its chunks inserted at the end of the id order), and the second
// chunk of every eleventh file of the first repository is deleted (its
// span stays as it was, a bound). The first repository's runs under src/ are
// then its first stretch and a few late fragments, with the other
// repositories' chunks in between.
func seedCodeInterleaved(t *testing.T, env *pgtest.Env) (tenant string, repoIDs []int64) {
	t.Helper()
	ctx := context.Background()
	if err := env.Admin.Pool.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('interleaved', 'interleaved') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	err := env.Admin.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		q := postgres.Raw(tx)
		for r := 0; r < 3; r++ {
			var id int64
			if err := q.QueryRow(ctx, `INSERT INTO repositories (tenant_id, full_name, indexed_commit, indexed_at) VALUES ($1, $2, 'c0ffee', now()) RETURNING id`,
				tenant, fmt.Sprintf("org/interleaved-%d", r)).Scan(&id); err != nil {
				return err
			}
			repoIDs = append(repoIDs, id)
			if _, err := q.Exec(ctx, seedFilesSQL, tenant, id, 600); err != nil {
				return err
			}
		}
		if _, err := q.Exec(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			SELECT $1, f.repository_id, f.id, k * 40 + 1, k * 40 + 50, `+seedChunkContent(50)+`
			FROM code_files f CROSS JOIN generate_series(0, 1) k
			WHERE f.tenant_id = $1 ORDER BY f.path, k, f.repository_id`, tenant); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `SELECT setval(pg_get_serial_sequence('code_chunks', 'id'), `+chunkIDsHigh+` + 1 + 10000)`); err != nil {
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
		// As ReplaceStoredFile does: the span starts again from the new chunks.
		if _, err := q.Exec(ctx, `UPDATE code_files f SET chunk_lo = NULL, chunk_hi = NULL FROM moved m WHERE f.tenant_id = $1 AND f.id = m.file_id`, tenant); err != nil {
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

// How search_code_candidates reads a path prefix's runs (its query
// text, as auto_explain logs it): its files summed up per repository, or
// every file's span merged.
const (
	runsPerRepo = "FROM s GROUP BY s.rid"
	runsPerFile = "SELECT 1 AS n, s.hi - greatest(s.lo, $4 + 1) + 1 AS ids"
)

// TestCodeFileSpans: every file's chunk_lo and chunk_hi (migration 0066)
// bound its chunks' ids (NULL: it never had chunks) through interleaved
// inserts, a redaction's delete, clear and insert, partial deletes and a
// cascaded delete, as the administrator and as the runtime role
// (ReplaceStoredFile, whose rewritten files' spans are exact again, and
// which counts them as moved out of path order); an UPDATE of a chunk's id
// or file is refused, one of its content is not.
func TestCodeFileSpans(t *testing.T) {
	t.Parallel()
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
	checkSpans(t, env, tenant, nil)

	countedBefore := filesMoved(t, env, tenant)

	// The runtime role's own writes: stored files rewritten, a
	// directory's files deleted with their chunks by a cascade.
	var rewritten []int64
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
			rewritten = append(rewritten, f.ID)
		}
		_, err = postgres.Raw(tx).Exec(ctx, `DELETE FROM code_files WHERE tenant_id = $1 AND repository_id = $2 AND path LIKE 'src/dir1/%'`, tenant, repos[1])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rewritten) == 0 {
		t.Fatal("no stored file was rewritten")
	}
	checkSpans(t, env, tenant, rewritten)
	// Each rewritten file now lies out of path order, and is counted
	// (migration 0071).
	if got := filesMoved(t, env, tenant) - countedBefore; got != len(rewritten) {
		t.Errorf("code_files_moved grew by %d for %d rewritten files", got, len(rewritten))
	}

	err = env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		_, err := postgres.Raw(tx).Exec(ctx, `UPDATE code_chunks SET content = content || 'x' WHERE tenant_id = $1 AND file_id = $2`, tenant, rewritten[0])
		return err
	})
	if err != nil {
		t.Fatalf("an UPDATE of a chunk's content: %v", err)
	}
	for _, set := range []string{"file_id = file_id + 1", "id = DEFAULT"} {
		err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
			_, err := postgres.Raw(tx).Exec(ctx, `UPDATE code_chunks SET `+set+` WHERE tenant_id = $1 AND file_id = $2`, tenant, rewritten[0])
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "never change") {
			t.Errorf("UPDATE code_chunks SET %s: %v, want it refused", set, err)
		}
	}
}

// checkSpans checks, as the administrator, that every file's span bounds
// its chunks' ids (a NULL span only where the file has no chunk), and that
// the span of each file in exact is its chunks' lowest and highest id.
func checkSpans(t *testing.T, env *pgtest.Env, tenant string, exact []int64) {
	t.Helper()
	var loose, inexact, files int
	err := env.Admin.Pool.QueryRow(context.Background(), `SELECT
			count(*) FILTER (WHERE s.lo IS NOT NULL AND NOT (f.chunk_lo <= s.lo AND s.hi <= f.chunk_hi)),
			count(*) FILTER (WHERE f.id = ANY($2) AND (f.chunk_lo IS DISTINCT FROM s.lo OR f.chunk_hi IS DISTINCT FROM s.hi)),
			count(*)
		FROM code_files f LEFT JOIN LATERAL (SELECT min(c.id) AS lo, max(c.id) AS hi FROM code_chunks c WHERE c.tenant_id = f.tenant_id AND c.file_id = f.id) s ON true
		WHERE f.tenant_id = $1`, tenant, exact).Scan(&loose, &inexact, &files)
	if err != nil {
		t.Fatal(err)
	}
	if loose != 0 || inexact != 0 || files == 0 {
		t.Fatalf("of %d files, %d have a span that does not bound their chunks, %d of %v one other than their chunks' ids", files, loose, inexact, exact)
	}
}

// TestSearchCandidatesRunsInterleaved pages through search_code_candidates
// under path prefixes whose chunks lie in runs of ids shared with other
// repositories' chunks of the same paths (the walk in the runs of the
// prefix's spans): the answers are exactly the reference's, and never a
// chunk of a repository the caller was not given, although its path is
// under the prefix and its id inside a run.
func TestSearchCandidatesRunsInterleaved(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	tenant, repos := seedCodeInterleaved(t, env)
	refreshCodeStats(t, env, tenant)
	// src/ is walked in its runs (the window of the runs reads them: a
	// function scan of the runs' bounds), and there is more than one run
	// (the rewritten files' chunks lie past a gap).
	// Its files' spans hold the other repositories' chunks, so the
	// runs are merged file by file, not summed up per repository.
	conn, plans := explainConn(t, env)
	for _, set := range [][]int64{repos[:1], {repos[0], repos[2]}} {
		plan := planOf(t, conn, plans, tenant, `SELECT chunk_id FROM search_code_candidates($1, $2, 'src/', 0, 200)`, set, []string{"%common%"})
		if !strings.Contains(plan, "Function Scan on i") {
			t.Fatalf("src/ of %v is not walked in its runs:\n%s", set, plan)
		}
		if !strings.Contains(plan, runsPerFile) {
			t.Fatalf("src/ of %v: the runs are not merged file by file:\n%s", set, plan)
		}
	}
	sets := []repoSet{{"the first of three", repos[:1]}, {"the second", repos[1:2]}, {"the first and third", []int64{repos[0], repos[2]}}}
	pages := 0
	if testing.Short() {
		pages = 40 // as TestSearchCandidatesHandoffs
	}
	checkCandidatesPages(t, env, tenant, sets, [][]string{{"common"}, {"middleword"}, {"needle_rare"}, {"nomatchatall"}},
		[]string{"src/", "src/dir2/", "src/dir5/file1"}, []int{1, 3, 8, 32, 200}, pages)
}
