package ingest

import (
	"context"
	"fmt"
	"slices"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

// RedactStats counts what Redact read and rewrote, by table.
type RedactStats struct {
	Scanned map[string]int
	Changed map[string]int
}

// redactBatch is how many rows (files, for the code index) one transaction
// rewrites: a failure loses at most one batch's progress, and rerunning
// continues idempotently.
const redactBatch = 200

// Redact runs the ingestion path again over every stored agent-readable
// column of a tenant: rows stored before redaction at ingestion existed (or
// before a rule was added) are rewritten as ingestion would store them
// now, and their secrets learned. Code files are rebuilt whole from their
// chunks and re-chunked, so a secret that spanned a chunk boundary is seen
// whole and chunks stay consistent with their file. Rows that are already
// clean are left alone, so running it twice changes nothing the second
// time.
func (in *Ingester) Redact(ctx context.Context, db *postgres.DB, tid string) (RedactStats, error) {
	st := RedactStats{Scanned: map[string]int{}, Changed: map[string]int{}}
	// Two passes: the first learns every secret its patterns find, so
	// that the second also redacts bare values of secrets learned from
	// rows read after them. Scanned counts the rows once.
	for pass := 0; pass < 2; pass++ {
		changed := map[string]int{}
		if err := in.redactPass(ctx, db, tid, st.Scanned, changed, pass == 0); err != nil {
			return st, err
		}
		for k, n := range changed {
			st.Changed[k] += n
		}
	}
	return st, nil
}

// redactPass is one pass of Redact over every table.
func (in *Ingester) redactPass(ctx context.Context, db *postgres.DB, tid string, scanned, changed map[string]int, count bool) error {
	st := RedactStats{Scanned: map[string]int{}, Changed: changed}
	if count {
		st.Scanned = scanned
	}
	for _, t := range postgres.StoredTables {
		for after := int64(0); ; {
			n := 0
			err := db.InTenant(ctx, tid, func(tx *postgres.Tx) error {
				rows, err := tx.StoredRows(ctx, t, after, redactBatch)
				if err != nil {
					return err
				}
				n = len(rows)
				var l Learned
				k, err := l.known(ctx, tx)
				if err != nil {
					return err
				}
				d := in.documentWith(&l, k)
				for _, row := range rows {
					after = row.ID
					clean := postgres.StoredRow{ID: row.ID, Texts: make([]string, len(row.Texts)), Globs: make([]string, len(row.Globs))}
					for i, s := range row.Texts {
						clean.Texts[i] = d(s)
					}
					for i, s := range row.Globs {
						clean.Globs[i] = d(s)
					}
					st.Scanned[t.Name]++
					if slices.Equal(clean.Texts, row.Texts) && slices.Equal(clean.Globs, row.Globs) {
						continue
					}
					if err := tx.UpdateStoredRow(ctx, t, clean); err != nil {
						return err
					}
					st.Changed[t.Name]++
				}
				return l.Record(ctx, tx)
			})
			if err != nil {
				return fmt.Errorf("redact %s: %w", t.Name, err)
			}
			if n < redactBatch {
				break
			}
		}
	}
	for after := int64(0); ; {
		n := 0
		err := db.InTenant(ctx, tid, func(tx *postgres.Tx) error {
			files, err := tx.StoredFiles(ctx, after, redactBatch)
			if err != nil {
				return err
			}
			n = len(files)
			var l Learned
			k, err := l.known(ctx, tx)
			if err != nil {
				return err
			}
			d := in.documentWith(&l, k)
			for _, f := range files {
				after = f.ID
				st.Scanned["code_files"]++
				clean := in.file(codeindex.File{Path: f.Path, Lines: f.Lines}, d)
				if clean.Path == f.Path && slices.Equal(clean.Lines, f.Lines) {
					continue
				}
				nf := f
				nf.Path, nf.Lines = clean.Path, clean.Lines
				if f.Lines == nil {
					nf.Lines = nil
				}
				if nf.Path != f.Path {
					base := nf.Path
					for k := 2; ; k++ {
						taken, err := tx.StoredPathTaken(ctx, nf)
						if err != nil {
							return err
						}
						if !taken {
							break
						}
						nf.Path = fmt.Sprintf("%s~%d", base, k)
					}
				}
				if err := tx.ReplaceStoredFile(ctx, nf); err != nil {
					return err
				}
				st.Changed["code_files"]++
			}
			return l.Record(ctx, tx)
		})
		if err != nil {
			return fmt.Errorf("redact code_files: %w", err)
		}
		if n < redactBatch {
			break
		}
	}
	return nil
}

// documentWith prepares a document as Document does, then redacts bare
// values of the known secrets k (nil: none).
func (in *Ingester) documentWith(l *Learned, k *secretscan.Known) func(string) string {
	return func(s string) string {
		s = in.Document(s, l)
		if k != nil {
			s, _ = k.Redact(s)
		}
		return s
	}
}
