package ingest

import (
	"context"
	"fmt"
	"slices"
	"time"

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
					written, err := tx.UpdateStoredRow(ctx, t, row, clean)
					if err != nil {
						return err
					}
					if written {
						st.Changed[t.Name]++
					}
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

// SecretsWait is how long RedactKnown tries to take a tenant's known
// secrets from the transactions that read them before it starts
// (postgres.StartSecretRescan).
const SecretsWait = 5 * time.Second

// knownBatch is how many rows (chunks, for the code index) one read of
// RedactKnown takes.
const knownBatch = 1000

// RedactKnown rewrites every stored agent-readable text of a tenant that
// holds the bare value of one of its known secrets, when a rescan was
// requested (a transaction learned a secret new to the tenant; migration
// 0072), or always with force. Ingestion redacts the secrets known when it
// stores a text; a secret learned later (a push adds the manifest that
// names a password) is redacted here from the text stored before: files
// the push did not touch, other repositories, findings, rules, pull
// requests' overlays.
//
// Only the known secrets' bare values are redacted (the patterns ran when
// the text was stored; cltctl redact runs them again). Such a value never
// spans a line, so chunks are rewritten in place, one by one, and keep
// their ids and lines. Each rewrite is its own transaction and writes only
// if the row still holds the text that was read, so a row that ingestion
// rewrote meanwhile (redacted with the secrets known by then) is left as it
// is, and the rescan holds no lock that ingestion waits for.
//
// The request is cleared at the end unless a secret was learned during
// the rescan; st.Pending then says another rescan is due. The audit event
// secrets.rescanned (by actor) records the rows rewritten per table.
// postgres.ErrSecretsBusy when ingestion held the tenant's known secrets
// for all of SecretsWait.
func (in *Ingester) RedactKnown(ctx context.Context, db *postgres.DB, tid string, force bool, actor postgres.Actor) (st KnownStats, err error) {
	st = KnownStats{RedactStats: RedactStats{Scanned: map[string]int{}, Changed: map[string]int{}}}
	requested, err := db.StartSecretRescan(ctx, tid, SecretsWait)
	if err != nil {
		return st, err
	}
	if requested == 0 && !force {
		return st, nil
	}
	st.Requested = requested > 0
	for _, t := range postgres.StoredTables {
		err := rescan(ctx, db, tid, t.Name, st.RedactStats,
			func(tx *postgres.Tx, after int64) ([]postgres.StoredRow, error) {
				return tx.StoredRows(ctx, t, after, knownBatch)
			},
			func(r postgres.StoredRow) int64 { return r.ID },
			func(pass func(string) string, row postgres.StoredRow) (postgres.StoredRow, bool) {
				clean := postgres.StoredRow{ID: row.ID, Texts: make([]string, len(row.Texts)), Globs: make([]string, len(row.Globs))}
				for i, s := range row.Texts {
					clean.Texts[i] = pass(s)
				}
				for i, s := range row.Globs {
					clean.Globs[i] = pass(s)
				}
				return clean, !slices.Equal(clean.Texts, row.Texts) || !slices.Equal(clean.Globs, row.Globs)
			},
			func(tx *postgres.Tx, old, clean postgres.StoredRow) (bool, error) {
				return tx.UpdateStoredRow(ctx, t, old, clean)
			})
		if err != nil {
			return st, err
		}
	}
	for _, c := range postgres.StoredColumns {
		err := rescan(ctx, db, tid, c.Table, st.RedactStats,
			func(tx *postgres.Tx, after int64) ([]postgres.StoredText, error) {
				return tx.StoredTexts(ctx, c, after, knownBatch)
			},
			func(t postgres.StoredText) int64 { return t.ID },
			func(pass func(string) string, t postgres.StoredText) (postgres.StoredText, bool) {
				clean := postgres.StoredText{ID: t.ID, Text: pass(t.Text)}
				return clean, clean.Text != t.Text
			},
			func(tx *postgres.Tx, old, clean postgres.StoredText) (bool, error) {
				return tx.RewriteStoredText(ctx, c, old.ID, old.Text, clean.Text)
			})
		if err != nil {
			return st, err
		}
	}
	cleared, err := db.FinishSecretRescan(ctx, tid, requested, actor, st.Changed)
	if err != nil {
		return st, err
	}
	st.Pending = requested > 0 && !cleared
	return st, nil
}

// rescan is RedactKnown's walk over one table: batches of rows in id order
// (read), each row redacted by the tenant's known secrets as read in the
// same transaction as the batch, so that a secret learned during the walk
// applies to the batches after it (clean reports a change), and each
// changed row written in a transaction of its own (write reports whether
// the row still held what was read).
func rescan[T any](ctx context.Context, db *postgres.DB, tid, table string, st RedactStats,
	read func(*postgres.Tx, int64) ([]T, error), id func(T) int64,
	clean func(func(string) string, T) (T, bool), write func(*postgres.Tx, T, T) (bool, error)) error {
	for after := int64(0); ; {
		var rows []T
		var k *secretscan.Known
		err := db.InTenant(ctx, tid, func(tx *postgres.Tx) error {
			var l Learned
			var err error
			if k, err = l.known(ctx, tx); err != nil {
				return err
			}
			rows, err = read(tx, after)
			return err
		})
		if err != nil {
			return fmt.Errorf("rescan %s: %w", table, err)
		}
		pass := knownPass(k)
		for _, row := range rows {
			after = id(row)
			st.Scanned[table]++
			c, changed := clean(pass, row)
			if !changed {
				continue
			}
			var written bool
			if err := db.InTenant(ctx, tid, func(tx *postgres.Tx) (err error) {
				written, err = write(tx, row, c)
				return err
			}); err != nil {
				return fmt.Errorf("rescan %s: %w", table, err)
			}
			if written {
				st.Changed[table]++
			}
		}
		if len(rows) < knownBatch {
			return nil
		}
	}
}

// KnownStats counts what RedactKnown read and rewrote, by table.
type KnownStats struct {
	RedactStats
	// Requested says a rescan had been requested (it ran without force).
	Requested bool
	// Pending says a secret was learned during the rescan: its request
	// stands, and the next rescan redacts the rows read before it.
	Pending bool
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
