package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

// River keeps its jobs in this database and is generic over the driver's
// transaction type, pgx.Tx. The River seam is here so that pkg/jobs uses
// River's API (workers, job args, insert options) without naming pgx: it
// builds clients with DB.NewRiverClient, holds them as *RiverClient and
// inserts inside a tenant transaction with Tx.InsertJob.

// RiverClient is a River client on this package's pool.
type RiverClient = river.Client[pgx.Tx]

// NewRiverClient returns a River client on db's pool.
func (db *DB) NewRiverClient(cfg *river.Config) (_ *RiverClient, err error) {
	defer wrap(&err, "postgres.NewRiverClient")
	return river.NewClient(riverpgxv5.New(db.Pool), cfg)
}

// RiverClientFromContext is the client working the current job (River puts
// it in the context of Work).
func RiverClientFromContext(ctx context.Context) *RiverClient {
	return river.ClientFromContext[pgx.Tx](ctx)
}

// InsertJob inserts a job in the transaction, so that it exists exactly when
// the transaction's other changes do. When River skips it as a duplicate of
// a waiting or running unique job, the result says so and holds that job.
func (tx *Tx) InsertJob(ctx context.Context, c *RiverClient, args river.JobArgs) (_ *rivertype.JobInsertResult, err error) {
	defer wrap(&err, "postgres.InsertJob")
	return c.InsertTx(ctx, tx.q, args, nil)
}

// MigrateRiver creates or updates River's tables, owned by the owner role:
// it connects with adminURL and acts as owner for the whole run.
func MigrateRiver(ctx context.Context, adminURL, ownerRole string) (err error) {
	defer wrap(&err, "postgres.MigrateRiver")
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = 2
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE "+pgx.Identifier{ownerRole}.Sanitize())
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// PendingJobs counts a tenant's jobs on queue that have not finished, and
// those that failed for good since since. River's table has no tenant
// column and no row-level security; the tenant is in the job's arguments.
func (db *DB) PendingJobs(ctx context.Context, queue, tenantID string, since time.Time) (pending, failed int, err error) {
	defer wrap(&err, "postgres.PendingJobs")
	err = db.Pool.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled')),
			count(*) FILTER (WHERE state = 'discarded' AND finalized_at >= $2)
		FROM river_job WHERE queue = $3 AND args->>'tenant_id' = $1`, tenantID, since, queue).Scan(&pending, &failed)
	return pending, failed, err
}

// TryAdvisoryLock takes a session advisory lock on key on a connection of
// its own, held until release is called. ok is false (and release nil) when
// another session holds it.
//
// The connection is opened for the lock, outside the pool: a job holds its
// lock while it works, and its work needs pool connections too. With the
// lock on a pooled connection, as many jobs as the pool has connections
// held them all and waited for one more, and nothing ran until the jobs
// timed out (4 workers on the default pool of a 4-core machine did).
func (db *DB) TryAdvisoryLock(ctx context.Context, key int64) (release func(), ok bool, err error) {
	defer wrap(&err, "postgres.TryAdvisoryLock")
	conn, err := pgx.ConnectConfig(ctx, db.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, false, classifyConn(err)
	}
	closeConn := func() { _ = conn.Close(context.WithoutCancel(ctx)) }
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		closeConn()
		return nil, false, classifyConn(err)
	}
	if !ok {
		closeConn()
		return nil, false, nil
	}
	return func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", key)
		closeConn()
	}, true, nil
}
