package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
)

// PullCodeHead is the indexed head of one pull request.
type PullCodeHead struct {
	Number           int
	HeadSHA, BaseSHA string
	Files            int
}

// PullCodeHeads returns the indexed heads of the repository's pull
// requests, by number.
func (tx *Tx) PullCodeHeads(ctx context.Context, repoID int64) (_ map[int]PullCodeHead, err error) {
	defer wrap(&err, "postgres.PullCodeHeads")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT number, head_sha, base_sha, files FROM pull_code_heads WHERE tenant_id = $1 AND repository_id = $2`, tenantID, repoID)
	if err != nil {
		return nil, err
	}
	out := map[int]PullCodeHead{}
	var h PullCodeHead
	_, err = pgx.ForEachRow(rows, []any{&h.Number, &h.HeadSHA, &h.BaseSHA, &h.Files}, func() error {
		out[h.Number] = h
		return nil
	})
	return out, err
}

// PullHead reads the indexed head of one pull request; ok is false when
// the pull request's head is not indexed.
func (t TenantDB) PullHead(ctx context.Context, repoID int64, number int) (h PullCodeHead, ok bool, err error) {
	defer wrap(&err, "postgres.PullHead")
	db, tenantID := t.db, t.tenantID
	err = db.InTenant(ctx, tenantID, func(tx *Tx) error {
		err := tx.q.QueryRow(ctx, `SELECT number, head_sha, base_sha, files FROM pull_code_heads
			WHERE tenant_id = $1 AND repository_id = $2 AND number = $3`, tenantID, repoID, number).Scan(&h.Number, &h.HeadSHA, &h.BaseSHA, &h.Files)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	return h, ok, err
}

// ReplacePullIndex stores the head of pull request number as an overlay
// on the base index at baseSHA: files are the files the pull request
// changes, read at headSHA; deleted the paths it removes. The previous
// overlay of the pull request is replaced in the caller's transaction.
// Text goes in as given: callers store through pkg/ingest, which learns
// its secrets in the same transaction.
func (tx *Tx) ReplacePullIndex(ctx context.Context, repoID int64, number int, headSHA, baseSHA string, files []codeindex.File, deleted []string) (_ IndexResult, err error) {
	defer wrap(&err, "postgres.ReplacePullIndex")
	tenantID := tx.tenantID
	res := IndexResult{Commit: headSHA}
	if _, err := tx.q.Exec(ctx, `DELETE FROM pull_code_heads WHERE tenant_id = $1 AND repository_id = $2 AND number = $3`, tenantID, repoID, number); err != nil {
		return res, err
	}
	if _, err := tx.q.Exec(ctx, `INSERT INTO pull_code_heads (tenant_id, repository_id, number, head_sha, base_sha, files)
		VALUES ($1, $2, $3, $4, $5, $6)`, tenantID, repoID, number, headSHA, baseSHA, len(files)+len(deleted)); err != nil {
		return res, err
	}
	for _, p := range deleted {
		if _, err := tx.q.Exec(ctx, `INSERT INTO pull_code_files (tenant_id, repository_id, number, path, deleted)
			VALUES ($1, $2, $3, $4, true) ON CONFLICT DO NOTHING`, tenantID, repoID, number, p); err != nil {
			return res, err
		}
	}
	for _, f := range files {
		var skip *string
		if f.SkipReason != "" {
			r := f.SkipReason
			skip = &r
			res.Skipped = append(res.Skipped, f)
		}
		var id int64
		if err := tx.q.QueryRow(ctx, `INSERT INTO pull_code_files (tenant_id, repository_id, number, path, language, size, line_count, skip_reason)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (tenant_id, repository_id, number, path) DO UPDATE SET deleted = false, language = EXCLUDED.language,
				size = EXCLUDED.size, line_count = EXCLUDED.line_count, skip_reason = EXCLUDED.skip_reason
			RETURNING id`, tenantID, repoID, number, f.Path, f.Language, f.Size, len(f.Lines), skip).Scan(&id); err != nil {
			return res, err
		}
		res.Files++
		if skip != nil {
			continue
		}
		chunks := codeindex.Chunks(f.Lines)
		starts, ends, contents := make([]int32, len(chunks)), make([]int32, len(chunks)), make([]string, len(chunks))
		for i, c := range chunks {
			starts[i], ends[i], contents[i] = int32(c.StartLine), int32(c.EndLine), c.Content
		}
		tag, err := tx.q.Exec(ctx, `INSERT INTO pull_code_chunks (tenant_id, repository_id, number, file_id, start_line, end_line, content)
			SELECT $1, $2, $3, $4, u.s, u.e, u.c FROM unnest($5::int[], $6::int[], $7::text[]) WITH ORDINALITY AS u(s, e, c, n) ORDER BY u.n`,
			tenantID, repoID, number, id, starts, ends, contents)
		if err != nil {
			return res, err
		}
		res.Chunks += int(tag.RowsAffected())
	}
	return res, nil
}

// DropPullIndexes removes the overlays of the repository's pull requests
// that are not in open (closed or merged ones). It reports how many went.
func (tx *Tx) DropPullIndexes(ctx context.Context, repoID int64, open []int) (_ int, err error) {
	defer wrap(&err, "postgres.DropPullIndexes")
	tenantID := tx.tenantID
	if open == nil {
		open = []int{}
	}
	tag, err := tx.q.Exec(ctx, `DELETE FROM pull_code_heads WHERE tenant_id = $1 AND repository_id = $2 AND NOT (number = ANY($3::int[]))`, tenantID, repoID, open)
	return int(tag.RowsAffected()), err
}

// SearchPullCandidates runs search_pull_code_candidates: phase 1 the pull
// request's changed files (Shadowed marks those outside pathPrefix), phase
// 2 the base index under pathPrefix (Shadowed marks chunks the pull
// request replaces or deletes). patterns and regex filter as in
// SearchCandidates.
func (t TenantDB) SearchPullCandidates(ctx context.Context, repoID int64, number, phase int, patterns []string, regex, pathPrefix string, afterID int64, limit int) (_ []Candidate, err error) {
	defer wrap(&err, "postgres.SearchPullCandidates")
	db, tenantID := t.db, t.tenantID
	if patterns == nil {
		patterns = []string{}
	}
	var out []Candidate
	err = db.readTenant(ctx, tenantID, SearchTimeout, `SELECT chunk_id, repository_id, full_name, commit_sha, path, start_line, end_line, line_count, content, shadowed
		FROM search_pull_code_candidates($1, $2, $3, $4, $5, $6, $7, $8)`, []any{repoID, number, phase, patterns, pathPrefix, afterID, limit, nullIfEmpty(regex)},
		func(rows pgx.Rows) error {
			var err error
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Candidate, error) {
				var c Candidate
				err := r.Scan(&c.ChunkID, &c.RepositoryID, &c.FullName, &c.Commit, &c.Path, &c.StartLine, &c.EndLine, &c.LineCount, &c.Content, &c.Shadowed)
				return c, err
			})
			return err
		})
	if err != nil && isQueryCanceled(err) {
		return nil, ErrSearchTimeout
	}
	return out, err
}

// ReadPullFile reads lines [from, to] of a file at a pull request's head:
// from the overlay when the pull request changes the file, else from the
// base index. Commit is the pull request's head either way.
func (t TenantDB) ReadPullFile(ctx context.Context, repoID int64, head PullCodeHead, path string, from, to int) (_ IndexedFile, err error) {
	defer wrap(&err, "postgres.ReadPullFile")
	db, tenantID := t.db, t.tenantID
	var f IndexedFile
	var inOverlay bool
	err = db.InTenant(ctx, tenantID, func(tx *Tx) error {
		var fileID int64
		var skip *string
		var deleted bool
		err := tx.q.QueryRow(ctx, `SELECT id, path, deleted, language, size, line_count, skip_reason FROM pull_code_files
			WHERE tenant_id = $1 AND repository_id = $2 AND number = $3 AND path = $4`, tenantID, repoID, head.Number, path).
			Scan(&fileID, &f.Path, &deleted, &f.Language, &f.Size, &f.LineCount, &skip)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		inOverlay = true
		if deleted {
			return codelotse.Errorf(codelotse.NotFound, "File %s is deleted in pull request #%d.", path, head.Number)
		}
		f.RepositoryID, f.Commit = repoID, head.HeadSHA
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
		f.FirstLine = from
		if from > to {
			return nil
		}
		rows, err := tx.q.Query(ctx, `SELECT start_line, content FROM pull_code_chunks
			WHERE tenant_id = $1 AND file_id = $2 AND end_line >= $3 AND start_line <= $4 ORDER BY start_line`, tenantID, fileID, from, to)
		if err != nil {
			return err
		}
		f.Lines, err = windowLines(rows, from, to)
		return err
	})
	if err != nil || inOverlay {
		return f, err
	}
	f, err = t.ReadIndexedFile(ctx, repoID, path, from, to)
	f.Commit = head.HeadSHA
	return f, err
}

// windowLines collects lines [from, to] from overlapping chunks.
func windowLines(rows pgx.Rows, from, to int) ([]string, error) {
	lines := make([]string, 0, to-from+1)
	next := from
	for rows.Next() {
		var start int
		var content string
		if err := rows.Scan(&start, &content); err != nil {
			rows.Close()
			return nil, err
		}
		for i, l := range strings.Split(content, "\n") {
			if n := start + i; n == next && n <= to {
				lines = append(lines, l)
				next++
			}
		}
	}
	return lines, rows.Err()
}
