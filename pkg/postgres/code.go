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

// IndexResult says what ReplaceIndex or UpdateIndex stored.
type IndexResult struct {
	Commit string
	// Files and Chunks count the files and chunks stored (for an update:
	// those of the changed files).
	Files  int
	Chunks int
	// Written counts the chunks written: all of Chunks for a whole
	// indexing or a moved file, only those whose text changed for a file
	// rewritten in place.
	Written int
	// Moved counts the files an update wrote at the end of the id order.
	Moved   int
	Skipped []codeindex.File
}

// ReplaceIndex stores a repository's snapshot as its code index, replacing
// the previous one in the caller's transaction: readers see the old index
// until the transaction commits and the new one after, never a mix.
func (tx *Tx) ReplaceIndex(ctx context.Context, repoID int64, snap codeindex.Snapshot, actor Actor) (_ IndexResult, err error) {
	defer wrap(&err, "postgres.ReplaceIndex")
	tenantID := tx.tenantID
	res := IndexResult{Commit: snap.Commit}
	// Written whole, in path order: nothing is out of place (migration
	// 0071). The repository's row is written (and locked) before its
	// files, as UpdateIndex and ReplaceStoredFile lock them, so that two
	// writers of one repository wait for each other instead of deadlocking.
	if _, err := tx.q.Exec(ctx, `UPDATE repositories SET indexed_commit = $3, indexed_at = now(), code_files_moved = 0 WHERE tenant_id = $1 AND id = $2`,
		tenantID, repoID, snap.Commit); err != nil {
		return res, err
	}
	if _, err := tx.q.Exec(ctx, `DELETE FROM code_files WHERE tenant_id = $1 AND repository_id = $2`, tenantID, repoID); err != nil {
		return res, err
	}
	if err := tx.insertFiles(ctx, repoID, snap.Commit, snap.Files, &res); err != nil {
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
	paths := make([]string, n)
	for i, f := range files {
		paths[i] = f.Path
	}
	c := columnsOf(files, res)
	rows, err := tx.q.Query(ctx, `INSERT INTO code_files (tenant_id, repository_id, commit_sha, path, language, size, blob_sha, line_count, skip_reason)
		SELECT $1, $2, $3, u.path, u.lang, u.size, u.blob, u.lines, u.skip
		FROM unnest($4::text[], $5::text[], $6::bigint[], $7::text[], $8::int[], $9::text[]) AS u(path, lang, size, blob, lines, skip)
		RETURNING id, path`, tenantID, repoID, commit, paths, c.langs, c.sizes, c.blobs, c.counts, c.skips)
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
	// paths.
	b := chunkRows{write: func(fileIDs []int64, starts, ends []int32, contents []string) error {
		tag, err := tx.q.Exec(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			SELECT $1, $2, u.file_id, u.start_line, u.end_line, u.content
			FROM unnest($3::bigint[], $4::int[], $5::int[], $6::text[]) WITH ORDINALITY AS u(file_id, start_line, end_line, content, n)
			ORDER BY u.n`, tenantID, repoID, fileIDs, starts, ends, contents)
		res.Chunks += int(tag.RowsAffected())
		res.Written += int(tag.RowsAffected())
		return err
	}}
	for _, f := range files {
		for _, c := range fileChunks(f) {
			if err := b.add(ids[f.Path], c); err != nil {
				return err
			}
		}
	}
	return b.flush()
}

// fileColumns are the columns of code_files rows (but the path) that
// insertFiles and rewriteInPlace write, as arrays for unnest.
type fileColumns struct {
	langs, blobs []string
	sizes        []int64
	counts       []int32
	skips        []*string
}

// columnsOf is files' columns; the skipped files are added to res.Skipped.
func columnsOf(files []codeindex.File, res *IndexResult) fileColumns {
	n := len(files)
	c := fileColumns{langs: make([]string, n), blobs: make([]string, n), sizes: make([]int64, n), counts: make([]int32, n), skips: make([]*string, n)}
	for i, f := range files {
		c.langs[i], c.blobs[i], c.sizes[i], c.counts[i] = f.Language, f.BlobSHA, f.Size, int32(len(f.Lines))
		if f.SkipReason != "" {
			r := f.SkipReason
			c.skips[i] = &r
			res.Skipped = append(res.Skipped, f)
		}
	}
	return c
}

// chunkRows gathers chunk rows for statements of at most chunkBatch rows
// each (COPY is not allowed under row-level security, so chunks are
// written from arrays, a few thousand per statement); write runs one
// statement over them, keyed by file id (an insert) or chunk id (an
// update).
type chunkRows struct {
	keys         []int64
	starts, ends []int32
	contents     []string
	write        func(keys []int64, starts, ends []int32, contents []string) error
}

const chunkBatch = 4000

func (b *chunkRows) add(key int64, c codeindex.Chunk) error {
	b.keys = append(b.keys, key)
	b.starts, b.ends, b.contents = append(b.starts, int32(c.StartLine)), append(b.ends, int32(c.EndLine)), append(b.contents, c.Content)
	if len(b.keys) < chunkBatch {
		return nil
	}
	return b.flush()
}

func (b *chunkRows) flush() error {
	if len(b.keys) == 0 {
		return nil
	}
	err := b.write(b.keys, b.starts, b.ends, b.contents)
	b.keys, b.starts, b.ends, b.contents = b.keys[:0], b.starts[:0], b.ends[:0], b.contents[:0]
	return err
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

// MaxFilesMoved bounds how many of a repository's files UpdateIndex lets
// lie out of path order (written at the end of the id order since the
// index was last written whole) before it refuses with ErrIndexScattered,
// so that the caller indexes the repository whole again. Searches under a
// path prefix walk the runs of their files' ids (migration 0071): on the
// big tenant of issue 11, files moved at random over its five repositories
// made them 1.7-4.6 times as slow at 2,000 files, 1.4-2.8 times at 200,
// and up to 1.8 times at 64 (err under net/; the others within the
// machine's noise; docs/benchmarks.md). A whole indexing costs about 0.7 ms a chunk (a
// minute for the Go tree's 80,000 chunks), once per that many moves.
const MaxFilesMoved = 64

// FilesMovedAllowed is how many files of a repository of n files may lie
// out of path order: an eighth of them, at least 8 and at most
// MaxFilesMoved. A small repository is indexed whole sooner, at little
// cost, rather than spread over many places in the id order.
func FilesMovedAllowed(n int) int {
	return max(8, min(MaxFilesMoved, n/8))
}

// ErrIndexScattered is UpdateIndex's refusal when the update would leave
// more files out of path order than FilesMovedAllowed: the caller indexes the
// repository whole instead (ReplaceIndex). Nothing was written.
var ErrIndexScattered = errors.New("the repository's index is scattered: index it whole")

// UpdateIndex moves a repository's code index to commit by touching only
// what changed: the files in changed are replaced (with their chunks), the
// paths in deleted removed, and every other file is relabelled with the
// new commit without rewriting its chunks. The caller knows the index was
// at an ancestor of commit (a fast-forward of the default branch) and
// stores through pkg/ingest.
//
// A changed file keeps its place in the id order (the search order, in
// which a directory's chunks are one run) when its new chunks fit its old
// chunk ids: they take the first of them, in line order, and only the
// chunks whose lines or text changed are written. A new file, or one that
// grew past its ids, is written at the end of the id order and counted in
// repositories.code_files_moved (migration 0071); past FilesMovedAllowed,
// the update is refused with ErrIndexScattered.
func (tx *Tx) UpdateIndex(ctx context.Context, repoID int64, commit string, changed []codeindex.File, deleted []string, actor Actor) (_ IndexResult, err error) {
	defer wrap(&err, "postgres.UpdateIndex")
	tenantID := tx.tenantID
	res := IndexResult{Commit: commit}
	paths := make([]string, len(changed))
	for i, f := range changed {
		paths[i] = f.Path
	}
	// The repository's count of moved files and its number of files; its
	// row is locked (before its files, as ReplaceIndex and
	// ReplaceStoredFile lock them), so that two updates count their moves
	// one after the other.
	var moved, files int
	if err := tx.q.QueryRow(ctx, `SELECT r.code_files_moved,
			(SELECT count(*) FROM code_files f WHERE f.tenant_id = r.tenant_id AND f.repository_id = r.id)
		FROM repositories r WHERE r.tenant_id = $1 AND r.id = $2 FOR UPDATE OF r`,
		tenantID, repoID).Scan(&moved, &files); err != nil {
		return res, err
	}
	// The changed paths' stored files and their chunk ids.
	rows, err := tx.q.Query(ctx, `SELECT f.path, f.id, coalesce(array_agg(c.id ORDER BY c.id) FILTER (WHERE c.id IS NOT NULL), '{}')
		FROM code_files f LEFT JOIN code_chunks c ON c.tenant_id = f.tenant_id AND c.file_id = f.id
		WHERE f.tenant_id = $1 AND f.repository_id = $2 AND f.path = ANY($3)
		GROUP BY f.path, f.id`, tenantID, repoID, paths)
	if err != nil {
		return res, err
	}
	type stored struct {
		id     int64
		chunks []int64
		twice  bool
	}
	old := make(map[string]stored, len(changed))
	for rows.Next() {
		var p string
		var s stored
		if err := rows.Scan(&p, &s.id, &s.chunks); err != nil {
			rows.Close()
			return res, err
		}
		// (Two rows of one path, which the schema allows at two commits,
		// are both replaced by a moved file.)
		_, s.twice = old[p]
		old[p] = s
	}
	if err := rows.Err(); err != nil {
		return res, err
	}
	var inPlace []placedFile
	var move []codeindex.File
	gone := append([]string{}, deleted...)
	for _, f := range changed {
		chunks := fileChunks(f)
		s, ok := old[f.Path]
		if ok && !s.twice && len(chunks) <= len(s.chunks) {
			inPlace = append(inPlace, placedFile{File: f, id: s.id, chunks: chunks, ids: s.chunks})
			continue
		}
		move = append(move, f)
		gone = append(gone, f.Path)
	}
	moved += len(move)
	if len(move) > 0 && moved > FilesMovedAllowed(files) {
		return res, ErrIndexScattered
	}
	if _, err := tx.q.Exec(ctx, `DELETE FROM code_files WHERE tenant_id = $1 AND repository_id = $2 AND path = ANY($3)`, tenantID, repoID, gone); err != nil {
		return res, err
	}
	if err := tx.rewriteInPlace(ctx, commit, inPlace, &res); err != nil {
		return res, err
	}
	if _, err := tx.q.Exec(ctx, `UPDATE code_files SET commit_sha = $3 WHERE tenant_id = $1 AND repository_id = $2 AND commit_sha <> $3`, tenantID, repoID, commit); err != nil {
		return res, err
	}
	if err := tx.insertFiles(ctx, repoID, commit, move, &res); err != nil {
		return res, err
	}
	res.Files += len(inPlace)
	res.Moved = len(move)
	if _, err := tx.q.Exec(ctx, `UPDATE repositories SET indexed_commit = $3, indexed_at = now(), code_files_moved = $4 WHERE tenant_id = $1 AND id = $2`,
		tenantID, repoID, commit, moved); err != nil {
		return res, err
	}
	if err := tx.RefreshCodeStats(ctx, false); err != nil {
		return res, err
	}
	return res, tx.insertAudit(ctx, actor, "repository.indexed", commit,
		map[string]any{"repository_id": repoID, "changed": len(changed), "deleted": len(deleted), "chunks": res.Chunks,
			"moved": len(move), "incremental": true})
}

// placedFile is a changed file rewritten in place: its stored row and the
// ids of its stored chunks, of which its new chunks take the first.
type placedFile struct {
	codeindex.File
	id     int64
	chunks []codeindex.Chunk
	ids    []int64
}

// fileChunks is what insertFiles stores of f: none for a skipped file.
func fileChunks(f codeindex.File) []codeindex.Chunk {
	if f.SkipReason != "" {
		return nil
	}
	return codeindex.Chunks(f.Lines)
}

// rewriteInPlace stores files over their own rows at commit: the file's
// row is updated, its new chunks overwrite its first chunk ids (a chunk whose
// lines and text are unchanged is left alone: no dead row, no index
// entry) and its surplus chunks are deleted. The file's span of chunk ids
// (migration 0066) stays a bound. The chunks' count is added to
// res.Chunks, those written to res.Written.
func (tx *Tx) rewriteInPlace(ctx context.Context, commit string, files []placedFile, res *IndexResult) error {
	if len(files) == 0 {
		return nil
	}
	tenantID := tx.tenantID
	ids, plain := make([]int64, len(files)), make([]codeindex.File, len(files))
	var surplus []int64
	for i, f := range files {
		ids[i], plain[i] = f.id, f.File
		surplus = append(surplus, f.ids[len(f.chunks):]...)
	}
	c := columnsOf(plain, res)
	if _, err := tx.q.Exec(ctx, `UPDATE code_files f SET commit_sha = $8, language = u.lang, size = u.size, blob_sha = u.blob, line_count = u.lines, skip_reason = u.skip
		FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::int[], $7::text[]) AS u(id, lang, size, blob, lines, skip)
		WHERE f.tenant_id = $1 AND f.id = u.id`, tenantID, ids, c.langs, c.sizes, c.blobs, c.counts, c.skips, commit); err != nil {
		return err
	}
	if len(surplus) > 0 {
		if _, err := tx.q.Exec(ctx, `DELETE FROM code_chunks WHERE tenant_id = $1 AND id = ANY($2)`, tenantID, surplus); err != nil {
			return err
		}
	}
	b := chunkRows{write: func(chunkIDs []int64, starts, ends []int32, contents []string) error {
		tag, err := tx.q.Exec(ctx, `UPDATE code_chunks c SET start_line = u.s, end_line = u.e, content = u.c
			FROM unnest($2::bigint[], $3::int[], $4::int[], $5::text[]) AS u(id, s, e, c)
			WHERE c.tenant_id = $1 AND c.id = u.id AND (c.start_line, c.end_line, c.content) IS DISTINCT FROM (u.s, u.e, u.c)`,
			tenantID, chunkIDs, starts, ends, contents)
		res.Written += int(tag.RowsAffected())
		return err
	}}
	for _, f := range files {
		res.Chunks += len(f.chunks)
		for j, c := range f.chunks {
			if err := b.add(f.ids[j], c); err != nil {
				return err
			}
		}
	}
	return b.flush()
}

// nullIfEmpty is NULL for "" (an optional text argument).
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
