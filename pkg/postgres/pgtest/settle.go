package pgtest

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Execer runs a statement: a *pgx.Conn or a *pgxpool.Pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Settle readies freshly loaded benchmark data for measuring: it vacuums
// and analyzes the tables (visibility map, hint bits, statistics), then
// forces a checkpoint, so that the load's dirty pages are written before
// the first measurement and not during it. After a load of a gigabyte or
// more (the full-size code fixture writes about 1.5 GB with its indexes)
// the checkpointer and the kernel's writeback otherwise compete with the
// benchmark for the disk and the cores for minutes. CHECKPOINT needs a
// superuser or pg_checkpoint; without either it is skipped.
func Settle(ctx context.Context, db Execer, tables ...string) error {
	for _, t := range tables {
		if _, err := db.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
			return fmt.Errorf("vacuum %s: %w", t, err)
		}
	}
	if _, err := db.Exec(ctx, "CHECKPOINT"); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			return nil
		}
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
