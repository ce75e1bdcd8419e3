package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestAdvisoryLockTakesNoPoolConnection: a job's lock is held on a
// connection of its own, so the job's transactions still find a pool
// connection while it holds the lock; a pool of one shows it. (With the
// lock on a pooled connection, as many jobs as the pool had connections
// held them all and waited forever for one more.) A second session cannot
// take the lock until it is released.
func TestAdvisoryLockTakesNoPoolConnection(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	tn := seedTenant(t, env, "acme")
	one, err := postgres.OpenURL(ctx, env.AppURL+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()

	release, ok, err := one.TryAdvisoryLock(ctx, 42)
	if err != nil || !ok {
		t.Fatalf("lock: ok=%v err=%v", ok, err)
	}
	released := false
	defer func() { // before one.Close, which waits for its connections
		if !released {
			release()
		}
	}()
	if n := one.Pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("the lock holds %d pool connections, want 0", n)
	}
	// Bounded, so that a regression fails instead of waiting for ever.
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := one.InTenant(tctx, tn, func(tx *postgres.Tx) error {
		_, err := tx.MCPEnabled(tctx)
		return err
	}); err != nil {
		t.Fatalf("a transaction while the lock is held: %v", err)
	}
	if _, ok, err := env.App.TryAdvisoryLock(ctx, 42); err != nil || ok {
		t.Fatalf("a second session took the held lock: ok=%v err=%v", ok, err)
	}
	release()
	released = true
	again, ok, err := env.App.TryAdvisoryLock(ctx, 42)
	if err != nil || !ok {
		t.Fatalf("lock after release: ok=%v err=%v", ok, err)
	}
	again()
}
