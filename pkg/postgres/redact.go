package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codeindex"
)

// TenantIDs lists every tenant, for maintenance commands run on the
// administrative connection (which sees all tenants).
func (db *DB) TenantIDs(ctx context.Context) (_ []string, err error) {
	defer wrap(&err, "postgres.TenantIDs")
	rows, err := db.Pool.Query(ctx, "SELECT id::text FROM tenants ORDER BY slug")
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// StoredTable is a table whose text columns hold agent-readable text that
// `cltctl redact` rewrites. Columns are text; Globs, when set, is a text[]
// column rewritten element by element.
type StoredTable struct {
	Name    string
	Columns []string
	Globs   string
}

// StoredTables are the tables with agent-readable text besides the code
// index (code_files and code_chunks, rewritten per file). Repository full
// names are identifiers constrained to OWNER/NAME and are not rewritten.
var StoredTables = []StoredTable{
	{Name: "repositories", Columns: []string{"default_branch", "url"}},
	{Name: "pull_requests", Columns: []string{"title", "author", "base_ref", "head_ref", "url"}},
	{Name: "reviews", Columns: []string{"external_id", "status", "summary", "author"}},
	{Name: "findings", Columns: []string{"rule_key", "path", "title", "body", "suggestion", "source"}},
	{Name: "rules", Columns: []string{"title", "instructions"}, Globs: "path_globs"},
}

// StoredRow is one row's agent-readable text.
type StoredRow struct {
	ID    int64
	Texts []string
	Globs []string
}

// StoredRows reads up to limit rows of t after id afterID, in id order.
func (tx *Tx) StoredRows(ctx context.Context, t StoredTable, afterID int64, limit int) (_ []StoredRow, err error) {
	defer wrap(&err, "postgres.StoredRows")
	tenantID := tx.tenantID
	cols := strings.Join(t.Columns, ", ")
	globs := "ARRAY[]::text[]"
	if t.Globs != "" {
		globs = t.Globs
	}
	// Table and column names come from StoredTables, never from input.
	rows, err := tx.q.Query(ctx, fmt.Sprintf(`SELECT id, %s, %s FROM %s WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3`, globs, cols, t.Name),
		tenantID, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.Name, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StoredRow, error) {
		row := StoredRow{Texts: make([]string, len(t.Columns))}
		dest := []any{&row.ID, &row.Globs}
		for i := range row.Texts {
			dest = append(dest, &row.Texts[i])
		}
		return row, r.Scan(dest...)
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.Name, err)
	}
	return out, nil
}

// UpdateStoredRow writes a row's rewritten text, clean, if the row still
// holds old's text (it reports whether it did). A row that another
// transaction changed since old was read is left as that transaction
// wrote it: written by ingestion, it was redacted with the secrets known
// then.
func (tx *Tx) UpdateStoredRow(ctx context.Context, t StoredTable, old, clean StoredRow) (_ bool, err error) {
	defer wrap(&err, "postgres.UpdateStoredRow")
	tenantID := tx.tenantID
	sets := make([]string, 0, len(t.Columns)+1)
	conds := make([]string, 0, len(t.Columns)+1)
	args := []any{tenantID, clean.ID}
	for i, c := range t.Columns {
		args = append(args, clean.Texts[i], old.Texts[i])
		sets = append(sets, fmt.Sprintf("%s = $%d", c, len(args)-1))
		conds = append(conds, fmt.Sprintf("%s IS NOT DISTINCT FROM $%d", c, len(args)))
	}
	if t.Globs != "" {
		args = append(args, clean.Globs, old.Globs)
		sets = append(sets, fmt.Sprintf("%s = $%d", t.Globs, len(args)-1))
		conds = append(conds, fmt.Sprintf("%s IS NOT DISTINCT FROM $%d", t.Globs, len(args)))
	}
	tag, err := tx.q.Exec(ctx, fmt.Sprintf(`UPDATE %s SET %s WHERE tenant_id = $1 AND id = $2 AND %s`,
		t.Name, strings.Join(sets, ", "), strings.Join(conds, " AND ")), args...)
	if err != nil {
		return false, fmt.Errorf("update %s %d: %w", t.Name, clean.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// StoredColumn is a text column of the code index or of the pull-request
// overlays, which a rescan for known secrets (pkg/ingest RedactKnown)
// rewrites in place, row by row: a known secret's bare value never spans a
// line, so redacting one chunk alone gives the same text as redacting its
// whole file, and no chunk moves. Path says the column is a file's path,
// unique within its repository (and pull request).
type StoredColumn struct {
	Table, Column string
	Path          bool
}

// StoredColumns are the columns of the code index and the overlays.
var StoredColumns = []StoredColumn{
	{Table: "code_files", Column: "path", Path: true},
	{Table: "code_chunks", Column: "content"},
	{Table: "pull_code_files", Column: "path", Path: true},
	{Table: "pull_code_chunks", Column: "content"},
}

// StoredText is one row's text of a StoredColumn.
type StoredText struct {
	ID   int64
	Text string
}

// StoredTexts reads up to limit rows' text of c after id afterID, in id
// order.
func (tx *Tx) StoredTexts(ctx context.Context, c StoredColumn, afterID int64, limit int) (_ []StoredText, err error) {
	defer wrap(&err, "postgres.StoredTexts")
	// Table and column names come from StoredColumns, never from input.
	rows, err := tx.q.Query(ctx, fmt.Sprintf(`SELECT id, %s FROM %s WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3`, c.Column, c.Table),
		tx.tenantID, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.Table, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StoredText, error) {
		var t StoredText
		return t, r.Scan(&t.ID, &t.Text)
	})
}

// RewriteStoredText sets row id's text of c to text if it still holds old
// (it reports whether it did; see UpdateStoredRow). A path that another
// file of the same repository (and pull request) already has gets a ~2,
// ~3… suffix, as ingestion gives two paths that differ only in a secret.
func (tx *Tx) RewriteStoredText(ctx context.Context, c StoredColumn, id int64, old, text string) (_ bool, err error) {
	defer wrap(&err, "postgres.RewriteStoredText")
	tenantID := tx.tenantID
	if c.Path {
		same := "o.repository_id = f.repository_id"
		if c.Table == "pull_code_files" {
			same += " AND o.number = f.number"
		}
		base := text
		for k := 2; ; k++ {
			var taken bool
			if err := tx.q.QueryRow(ctx, fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %[1]s f JOIN %[1]s o ON o.tenant_id = f.tenant_id AND %[2]s
					WHERE f.tenant_id = $1 AND f.id = $2 AND o.path = $3 AND o.id <> f.id)`, c.Table, same),
				tenantID, id, text).Scan(&taken); err != nil {
				return false, err
			}
			if !taken {
				break
			}
			text = fmt.Sprintf("%s~%d", base, k)
		}
	}
	tag, err := tx.q.Exec(ctx, fmt.Sprintf(`UPDATE %[1]s SET %[2]s = $4 WHERE tenant_id = $1 AND id = $2 AND %[2]s = $3`, c.Table, c.Column),
		tenantID, id, old, text)
	if err != nil {
		return false, fmt.Errorf("update %s %d: %w", c.Table, id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// StoredFile is one indexed file's path and whole content, rebuilt from
// its chunks.
type StoredFile struct {
	ID           int64
	RepositoryID int64
	Commit       string
	Path         string
	Lines        []string
}

// StoredFiles reads up to limit indexed files (not skipped ones' content,
// which is not stored) after id afterID, each with its lines rebuilt from
// its chunks.
func (tx *Tx) StoredFiles(ctx context.Context, afterID int64, limit int) (_ []StoredFile, err error) {
	defer wrap(&err, "postgres.StoredFiles")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT f.id, f.repository_id, f.commit_sha, f.path, f.line_count,
			coalesce(array_agg(c.start_line ORDER BY c.start_line) FILTER (WHERE c.id IS NOT NULL), '{}'),
			coalesce(array_agg(c.content ORDER BY c.start_line) FILTER (WHERE c.id IS NOT NULL), '{}')
		FROM (SELECT * FROM code_files WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3) f
		LEFT JOIN code_chunks c ON c.tenant_id = f.tenant_id AND c.file_id = f.id
		GROUP BY f.id, f.repository_id, f.commit_sha, f.path, f.line_count
		ORDER BY f.id`, tenantID, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("read code_files: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StoredFile, error) {
		var f StoredFile
		var lineCount int
		var starts []int32
		var contents []string
		if err := r.Scan(&f.ID, &f.RepositoryID, &f.Commit, &f.Path, &lineCount, &starts, &contents); err != nil {
			return f, err
		}
		lines := make([]string, 0, lineCount)
		for i, content := range contents {
			for k, l := range strings.Split(content, "\n") {
				if int(starts[i])+k == len(lines)+1 {
					lines = append(lines, l)
				}
			}
		}
		if len(contents) > 0 {
			f.Lines = lines
		}
		return f, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read code_files: %w", err)
	}
	return out, nil
}

// ReplaceStoredFile rewrites an indexed file's path and rebuilds its chunks
// from lines (the same chunking as ReplaceIndex, so a secret that spanned a
// chunk boundary was seen whole by the caller and chunks stay consistent
// with the file).
func (tx *Tx) ReplaceStoredFile(ctx context.Context, f StoredFile) (err error) {
	defer wrap(&err, "postgres.ReplaceStoredFile")
	tenantID := tx.tenantID
	if f.Lines != nil {
		// The file's chunks go to the end of the id order: counted, so
		// that enough of them have the next push index the repository
		// whole (migration 0071). The repository's row is locked before
		// its files, as UpdateIndex locks them.
		if _, err := tx.q.Exec(ctx, `UPDATE repositories SET code_files_moved = code_files_moved + 1 WHERE tenant_id = $1 AND id = $2`,
			tenantID, f.RepositoryID); err != nil {
			return fmt.Errorf("count the moved file %d: %w", f.ID, err)
		}
	}
	// When the chunks are rewritten, the new ones come at the end of the id
	// order: the file's span of chunk ids is cleared here and starts again
	// from them (a delete leaves a span as it was, a bound; migration
	// 0066), so that a path search does not walk every id from the old
	// chunks to the new ones.
	if _, err := tx.q.Exec(ctx, `UPDATE code_files SET path = $3,
			chunk_lo = CASE WHEN $4 THEN NULL ELSE chunk_lo END, chunk_hi = CASE WHEN $4 THEN NULL ELSE chunk_hi END
		WHERE tenant_id = $1 AND id = $2`, tenantID, f.ID, f.Path, f.Lines != nil); err != nil {
		return fmt.Errorf("update code_files %d: %w", f.ID, err)
	}
	if f.Lines == nil {
		return nil
	}
	if _, err := tx.q.Exec(ctx, `DELETE FROM code_chunks WHERE tenant_id = $1 AND file_id = $2`, tenantID, f.ID); err != nil {
		return fmt.Errorf("delete code_chunks of %d: %w", f.ID, err)
	}
	chunks := codeindex.Chunks(f.Lines)
	starts, ends, contents := make([]int32, len(chunks)), make([]int32, len(chunks)), make([]string, len(chunks))
	for i, c := range chunks {
		starts[i], ends[i], contents[i] = int32(c.StartLine), int32(c.EndLine), c.Content
	}
	if _, err := tx.q.Exec(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
		SELECT $1, $2, $3, u.s, u.e, u.c FROM unnest($4::int[], $5::int[], $6::text[]) WITH ORDINALITY AS u(s, e, c, n) ORDER BY u.n`,
		tenantID, f.RepositoryID, f.ID, starts, ends, contents); err != nil {
		return fmt.Errorf("insert code_chunks of %d: %w", f.ID, err)
	}
	return nil
}

// StoredPathTaken reports whether another file of the same repository and
// commit already has path.
func (tx *Tx) StoredPathTaken(ctx context.Context, f StoredFile) (_ bool, err error) {
	defer wrap(&err, "postgres.StoredPathTaken")
	tenantID := tx.tenantID
	var taken bool
	err = tx.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM code_files WHERE tenant_id = $1 AND repository_id = $2 AND commit_sha = $3 AND path = $4 AND id <> $5)`,
		tenantID, f.RepositoryID, f.Commit, f.Path, f.ID).Scan(&taken)
	return taken, err
}
