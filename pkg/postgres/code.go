package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
)

// IndexResult says what ReplaceIndex stored.
type IndexResult struct {
	Commit  string
	Files   int
	Chunks  int
	Skipped []codeindex.File
}

// ReplaceIndex stores a repository's snapshot as its code index, replacing
// the previous one in the caller's transaction: readers see the old index
// until the transaction commits and the new one after, never a mix.
func (tx *Tx) ReplaceIndex(ctx context.Context, repoID int64, snap codeindex.Snapshot, actor Actor) (_ IndexResult, err error) {
	defer wrap(&err, "postgres.ReplaceIndex")
	tenantID := tx.tenantID
	res := IndexResult{Commit: snap.Commit}
	if _, err := tx.q.Exec(ctx, `DELETE FROM code_files WHERE tenant_id = $1 AND repository_id = $2`, tenantID, repoID); err != nil {
		return res, err
	}
	if err := tx.insertFiles(ctx, repoID, snap.Commit, snap.Files, &res); err != nil {
		return res, err
	}
	if _, err := tx.q.Exec(ctx, `UPDATE repositories SET indexed_commit = $3, indexed_at = now() WHERE tenant_id = $1 AND id = $2`,
		tenantID, repoID, snap.Commit); err != nil {
		return res, err
	}
	if err := tx.RefreshCodeStats(ctx, false); err != nil {
		return res, err
	}
	return res, tx.insertAudit(ctx, actor, "repository.indexed", snap.Commit,
		map[string]any{"repository_id": repoID, "files": res.Files, "chunks": res.Chunks, "skipped": len(res.Skipped)})
}

// CodeStatsSample is how many of a tenant's chunks RefreshCodeStats reads.
const CodeStatsSample = 2000

// RefreshCodeStats rewrites the tenant's trigram estimates
// (code_trigram_stats, which search_code_candidates reads to choose how to
// walk the rest of a tenant) from its chunks whose id is a multiple of k,
// k such that about CodeStatsSample are read, each trigram's count in the
// sample scaled to the tenant; the row with the empty trigram holds the
// tenant's chunk count. Trigrams the sample holds once are left out (rare
// to the search); a tenant of fewer than twice CodeStatsSample chunks is
// counted exactly. Unless force is set it does nothing while the tenant's
// chunk count is within a tenth of the one last counted (reindexing one
// small repository of many changes no estimate that matters). A refresh
// takes a transaction-scoped advisory lock per tenant, so that two
// indexings of one tenant refresh one after the other. About 2 s for 400,000 chunks
// (docs/benchmarks.md), mostly show_trgm over the sample.
func (tx *Tx) RefreshCodeStats(ctx context.Context, force bool) (err error) {
	defer wrap(&err, "postgres.RefreshCodeStats")
	tenantID := tx.tenantID
	var total int64
	var last *int64
	if err := tx.q.QueryRow(ctx, `SELECT (SELECT count(*) FROM code_chunks WHERE tenant_id = $1),
		(SELECT chunks FROM code_trigram_stats WHERE tenant_id = $1 AND trigram = '')`, tenantID).Scan(&total, &last); err != nil {
		return err
	}
	if !force && last != nil && 10*abs(total-*last) <= *last {
		return nil
	}
	// Only a refresh takes the lock (a skip reads and leaves), so that
	// pushes to several repositories of a tenant do not queue behind one
	// another; two refreshes that both decided to run take turns.
	if _, err := tx.q.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('code_trigram_stats ' || $1, 0))`, tenantID); err != nil {
		return err
	}
	if _, err := tx.q.Exec(ctx, `DELETE FROM code_trigram_stats WHERE tenant_id = $1`, tenantID); err != nil {
		return err
	}
	_, err = tx.q.Exec(ctx, `
		WITH k AS (SELECT greatest(1, $2::bigint / $3) AS step),
		sample AS (SELECT c.content FROM code_chunks c, k WHERE c.tenant_id = $1 AND c.id % k.step = 0),
		m AS (SELECT count(*) AS sampled FROM sample)
		INSERT INTO code_trigram_stats (tenant_id, trigram, chunks)
		SELECT $1, t.g, (count(*) * $2 / greatest(max(m.sampled), 1))::bigint
		FROM sample CROSS JOIN LATERAL unnest(show_trgm(sample.content)) AS t(g), k, m
		GROUP BY t.g HAVING count(*) >= 2 OR max(k.step) = 1
		UNION ALL SELECT $1, '', $2`, tenantID, total, CodeStatsSample)
	return err
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// insertFiles stores files (with their chunks) at commit, counting them in
// res.
func (tx *Tx) insertFiles(ctx context.Context, repoID int64, commit string, files []codeindex.File, res *IndexResult) error {
	tenantID := tx.tenantID
	n := len(files)
	paths, langs, blobs, skips := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	sizes := make([]int64, n)
	counts := make([]int32, n)
	for i, f := range files {
		paths[i], langs[i], blobs[i], sizes[i], counts[i] = f.Path, f.Language, f.BlobSHA, f.Size, int32(len(f.Lines))
		if f.SkipReason != "" {
			r := f.SkipReason
			skips[i] = &r
			res.Skipped = append(res.Skipped, f)
		}
	}
	rows, err := tx.q.Query(ctx, `INSERT INTO code_files (tenant_id, repository_id, commit_sha, path, language, size, blob_sha, line_count, skip_reason)
		SELECT $1, $2, $3, u.path, u.lang, u.size, u.blob, u.lines, u.skip
		FROM unnest($4::text[], $5::text[], $6::bigint[], $7::text[], $8::int[], $9::text[]) AS u(path, lang, size, blob, lines, skip)
		RETURNING id, path`, tenantID, repoID, commit, paths, langs, sizes, blobs, counts, skips)
	if err != nil {
		return err
	}
	ids := make(map[string]int64, n)
	for rows.Next() {
		var id int64
		var p string
		if err := rows.Scan(&id, &p); err != nil {
			rows.Close()
			return err
		}
		ids[p] = id
	}
	if err := rows.Err(); err != nil {
		return err
	}
	res.Files += n

	// Chunks go in path order, so that chunk ids (the search order) follow
	// paths. COPY is not allowed under row-level security, so they are
	// inserted from arrays, a few thousand per statement.
	const batch = 4000
	fileIDs := make([]int64, 0, batch)
	starts, ends := make([]int32, 0, batch), make([]int32, 0, batch)
	contents := make([]string, 0, batch)
	flush := func() error {
		if len(fileIDs) == 0 {
			return nil
		}
		tag, err := tx.q.Exec(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			SELECT $1, $2, u.file_id, u.start_line, u.end_line, u.content
			FROM unnest($3::bigint[], $4::int[], $5::int[], $6::text[]) WITH ORDINALITY AS u(file_id, start_line, end_line, content, n)
			ORDER BY u.n`, tenantID, repoID, fileIDs, starts, ends, contents)
		if err != nil {
			return err
		}
		res.Chunks += int(tag.RowsAffected())
		fileIDs, starts, ends, contents = fileIDs[:0], starts[:0], ends[:0], contents[:0]
		return nil
	}
	for _, f := range files {
		if f.SkipReason != "" {
			continue
		}
		for _, c := range codeindex.Chunks(f.Lines) {
			fileIDs = append(fileIDs, ids[f.Path])
			starts, ends, contents = append(starts, int32(c.StartLine)), append(ends, int32(c.EndLine)), append(contents, c.Content)
			if len(fileIDs) == batch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return nil
}

// Candidate is one chunk returned by the search functions: the search
// engine's own type, so its rows need no conversion.
type Candidate = codeindex.Candidate

// SearchTimeout bounds each candidate query (ARCHITECTURE §6.6).
const SearchTimeout = 2 * time.Second

// ErrSearchTimeout is returned when the statement timeout cancelled a search
// (the search engine's answer when its deadline does, so both read alike).
var ErrSearchTimeout = codeindex.ErrSearchTimeout

// SearchCandidates runs search_code_candidates for the tenant: chunks of
// repoIDs containing all patterns and matching regex (a PostgreSQL ARE,
// codeindex.Plan.Regex; empty: none), under pathPrefix, after chunk
// afterID. The regex is a bound parameter like the patterns.
func (t TenantDB) SearchCandidates(ctx context.Context, repoIDs []int64, patterns []string, regex, pathPrefix string, afterID int64, limit int) (_ []Candidate, err error) {
	defer wrap(&err, "postgres.SearchCandidates")
	db, tenantID := t.db, t.tenantID
	if patterns == nil {
		patterns = []string{}
	}
	var out []Candidate
	err = db.readTenant(ctx, tenantID, SearchTimeout, `SELECT chunk_id, repository_id, full_name, commit_sha, path, start_line, end_line, line_count, content
		FROM search_code_candidates($1, $2, $3, $4, $5, $6)`, []any{repoIDs, patterns, pathPrefix, afterID, limit, nullIfEmpty(regex)},
		func(rows pgx.Rows) error {
			var err error
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Candidate, error) {
				var c Candidate
				err := r.Scan(&c.ChunkID, &c.RepositoryID, &c.FullName, &c.Commit, &c.Path, &c.StartLine, &c.EndLine, &c.LineCount, &c.Content)
				return c, err
			})
			return err
		})
	if err != nil && isQueryCanceled(err) {
		return nil, ErrSearchTimeout
	}
	return out, err
}

// IndexedFile is one file of the code index.
type IndexedFile struct {
	RepositoryID int64
	Commit       string
	Path         string
	Language     string
	Size         int64
	LineCount    int
	SkipReason   string
	// Lines holds the requested window (first line is FirstLine).
	Lines     []string
	FirstLine int
}

// ReadIndexedFile reads lines [from, to] (1-based, inclusive; to 0 = end)
// of a file at the repository's indexed commit.
func (t TenantDB) ReadIndexedFile(ctx context.Context, repoID int64, path string, from, to int) (_ IndexedFile, err error) {
	defer wrap(&err, "postgres.ReadIndexedFile")
	db, tenantID := t.db, t.tenantID
	var f IndexedFile
	err = db.InTenant(ctx, tenantID, func(tx *Tx) error {
		var fileID int64
		var skip *string
		err := tx.q.QueryRow(ctx, `SELECT f.id, f.commit_sha, f.path, f.language, f.size, f.line_count, f.skip_reason
			FROM code_files f JOIN repositories r ON r.tenant_id = f.tenant_id AND r.id = f.repository_id AND r.indexed_commit = f.commit_sha
			WHERE f.tenant_id = $1 AND f.repository_id = $2 AND f.path = $3`, tenantID, repoID, path).
			Scan(&fileID, &f.Commit, &f.Path, &f.Language, &f.Size, &f.LineCount, &skip)
		if errors.Is(err, pgx.ErrNoRows) {
			return codelotse.Errorf(codelotse.NotFound, "File not found in the code index: %s", path)
		}
		if err != nil {
			return err
		}
		f.RepositoryID = repoID
		if skip != nil {
			f.SkipReason = *skip
			return nil
		}
		if to == 0 || to > f.LineCount {
			to = f.LineCount
		}
		if from < 1 {
			from = 1
		}
		if from > to {
			f.FirstLine = from
			return nil
		}
		rows, err := tx.q.Query(ctx, `SELECT start_line, content FROM code_chunks
			WHERE tenant_id = $1 AND file_id = $2 AND end_line >= $3 AND start_line <= $4 ORDER BY start_line`,
			tenantID, fileID, from, to)
		if err != nil {
			return err
		}
		lines := make([]string, 0, to-from+1)
		next := from
		for rows.Next() {
			var start int
			var content string
			if err := rows.Scan(&start, &content); err != nil {
				rows.Close()
				return err
			}
			for i, l := range strings.Split(content, "\n") {
				n := start + i
				if n == next && n <= to {
					lines = append(lines, l)
					next++
				}
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		f.Lines, f.FirstLine = lines, from
		return nil
	})
	return f, err
}

// UpdateIndex moves a repository's code index to commit by touching only
// what changed: the files in changed are replaced (with their chunks), the
// paths in deleted removed, and every other file is relabelled with the
// new commit without rewriting its chunks. The caller knows the index was
// at an ancestor of commit (a fast-forward of the default branch) and
// stores through pkg/ingest.
func (tx *Tx) UpdateIndex(ctx context.Context, repoID int64, commit string, changed []codeindex.File, deleted []string, actor Actor) (_ IndexResult, err error) {
	defer wrap(&err, "postgres.UpdateIndex")
	tenantID := tx.tenantID
	res := IndexResult{Commit: commit}
	gone := append([]string{}, deleted...)
	for _, f := range changed {
		gone = append(gone, f.Path)
	}
	if _, err := tx.q.Exec(ctx, `DELETE FROM code_files WHERE tenant_id = $1 AND repository_id = $2 AND path = ANY($3)`, tenantID, repoID, gone); err != nil {
		return res, err
	}
	if _, err := tx.q.Exec(ctx, `UPDATE code_files SET commit_sha = $3 WHERE tenant_id = $1 AND repository_id = $2 AND commit_sha <> $3`, tenantID, repoID, commit); err != nil {
		return res, err
	}
	if err := tx.insertFiles(ctx, repoID, commit, changed, &res); err != nil {
		return res, err
	}
	if _, err := tx.q.Exec(ctx, `UPDATE repositories SET indexed_commit = $3, indexed_at = now() WHERE tenant_id = $1 AND id = $2`,
		tenantID, repoID, commit); err != nil {
		return res, err
	}
	if err := tx.RefreshCodeStats(ctx, false); err != nil {
		return res, err
	}
	return res, tx.insertAudit(ctx, actor, "repository.indexed", commit,
		map[string]any{"repository_id": repoID, "changed": len(changed), "deleted": len(deleted), "chunks": res.Chunks, "incremental": true})
}

// nullIfEmpty is NULL for "" (an optional text argument).
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
