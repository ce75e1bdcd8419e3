package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/jobs"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

// repoFixture is a tenant with one repository and an insert-only job client.
func repoFixture(t *testing.T) (*pgtest.Env, codelotse.Tenant, int64, *jobs.Client) {
	t.Helper()
	env := pgtest.New(t)
	ctx := context.Background()
	tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "acme", Name: "Acme"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	var repoID int64
	if err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
		r, err := tx.AddRepository(ctx, postgres.NewRepository{FullName: "acme/api"})
		repoID = r.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewInsertOnly(env.App, nil)
	if err != nil {
		t.Fatal(err)
	}
	return env, tn, repoID, c
}

// TestOneSyncPerRepository: a second sync of a repository is not enqueued
// while one waits, and a worker that finds the repository locked by
// another worker snoozes instead of syncing it at the same time.
func TestOneSyncPerRepository(t *testing.T) {
	env, tn, repoID, c := repoFixture(t)
	ctx := context.Background()
	args := jobs.SyncRepositoryArgs{TenantID: tn.ID, RepositoryID: repoID}
	first, _, err := c.Enqueue(ctx, args)
	if err != nil || !first {
		t.Fatalf("first enqueue: inserted=%v err=%v", first, err)
	}
	second, _, err := c.Enqueue(ctx, args)
	if err != nil || second {
		t.Fatalf("second enqueue of the same repository: inserted=%v err=%v, want a duplicate", second, err)
	}
	if other, _, err := c.Enqueue(ctx, jobs.SyncRepositoryArgs{TenantID: tn.ID, RepositoryID: repoID + 1}); err != nil || !other {
		t.Fatalf("another repository: inserted=%v err=%v", other, err)
	}

	// Another worker holds the repository.
	d := &jobs.Deps{DB: env.App, Ingest: ingest.New(secretscan.New())}
	unlock, err := d.LockRepository(ctx, tn.ID, repoID)
	if err != nil {
		t.Fatal(err)
	}
	err = d.SyncRepository(ctx, args)
	var snooze *river.JobSnoozeError
	if !errors.As(err, &snooze) {
		t.Fatalf("worker with the repository locked elsewhere: %v, want a snooze", err)
	}
	unlock()
	// Once released, the lock can be taken again.
	unlock2, err := d.LockRepository(ctx, tn.ID, repoID)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	unlock2()
}

// TestTenantJobsWaitForTheirPredecessor: a follower of a running
// installation sync or membership refresh snoozes while the tenant's job
// runs elsewhere, so the older job's writes never land after its own.
func TestTenantJobsWaitForTheirPredecessor(t *testing.T) {
	env, tn, _, _ := repoFixture(t)
	ctx := context.Background()
	d := &jobs.Deps{DB: env.App, Ingest: ingest.New(secretscan.New())}
	for what, work := range map[string]func() error{
		"installation": func() error { return d.SyncInstallation(ctx, tn.ID) },
		"memberships":  func() error { return d.RefreshMemberships(ctx, tn.ID) },
	} {
		unlock, err := d.LockTenant(ctx, what, tn.ID)
		if err != nil {
			t.Fatal(err)
		}
		err = work()
		unlock()
		var snooze *river.JobSnoozeError
		if !errors.As(err, &snooze) {
			t.Errorf("%s with the tenant's job running elsewhere: %v, want a snooze", what, err)
		}
		// Released, the job runs (and fails here: no installation).
		if err := work(); errors.As(err, &snooze) || err == nil {
			t.Errorf("%s after the release: %v, want it to run", what, err)
		}
	}
}

// TestPushWhileIndexingIsNotLost: an index job for a push is not dropped as
// a duplicate of the one running for the previous push (it read its head
// already); a repeated delivery of the same push is one job.
func TestPushWhileIndexingIsNotLost(t *testing.T) {
	env, tn, repoID, c := repoFixture(t)
	ctx := context.Background()
	const first, second = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	enqueue := func(commit string) {
		t.Helper()
		if err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
			return c.EnqueueIndex(ctx, tx, repoID, commit)
		}); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (n int) {
		t.Helper()
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'github.index_repository'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	enqueue(first)
	enqueue(first) // GitHub redelivers the push
	if n := count(); n != 1 {
		t.Fatalf("the same push twice: %d jobs, want 1", n)
	}
	// The first push's job runs (or is still listed as running).
	if _, err := env.Admin.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now()
		WHERE kind = 'github.index_repository'`); err != nil {
		t.Fatal(err)
	}
	enqueue(second)
	if n := count(); n != 2 {
		t.Fatalf("a push while the previous one is indexed: %d jobs, want 2", n)
	}
	// A deleted ref's zeros or a malformed commit are no commit: one job
	// waiting for whatever the head is.
	enqueue("0000000000000000000000000000000000000000")
	enqueue("not-a-commit")
	if n := count(); n != 3 {
		t.Fatalf("pushes without a commit: %d jobs, want 3", n)
	}
}

// TestChangeWhileSyncingIsNotLost: a webhook asking for a job while the
// same job runs (or is still listed as running: River records completions
// in batches) gets one more job that follows it, since the running job may
// have read GitHub before the change; more deliveries meanwhile coalesce
// into that follower, and a duplicate of a waiting job is still skipped.
func TestChangeWhileSyncingIsNotLost(t *testing.T) {
	env, tn, repoID, c := repoFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		kind    string
		enqueue func(tx *postgres.Tx) error
	}{
		{"github.sync_repository", func(tx *postgres.Tx) error { return c.EnqueueRepositorySync(ctx, tx, repoID) }},
		{"github.sync_installation", func(tx *postgres.Tx) error { return c.EnqueueInstallationSync(ctx, tx) }},
		{"github.refresh_memberships", func(tx *postgres.Tx) error { return c.EnqueueMembershipRefresh(ctx, tx) }},
		{"github.index_repository", func(tx *postgres.Tx) error { return c.EnqueueIndex(ctx, tx, repoID, "") }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			deliver := func() {
				t.Helper()
				if err := env.App.InTenant(ctx, tn.ID, tc.enqueue); err != nil {
					t.Fatal(err)
				}
			}
			// jobs lists the kind's jobs, oldest first, as "state follows".
			jobs := func() (out []string) {
				t.Helper()
				rows, err := env.Admin.Pool.Query(ctx, `SELECT id, state, coalesce((args->>'follows')::bigint, 0)
					FROM river_job WHERE kind = $1 ORDER BY id`, tc.kind)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				ids := map[int64]int{}
				for rows.Next() {
					var id, follows int64
					var state string
					if err := rows.Scan(&id, &state, &follows); err != nil {
						t.Fatal(err)
					}
					ids[id] = len(out)
					ref := "-"
					if i, ok := ids[follows]; ok {
						ref = fmt.Sprint(i)
					}
					out = append(out, state+" "+ref)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				return out
			}
			run := func(i int) {
				t.Helper()
				if _, err := env.Admin.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now()
					WHERE id = (SELECT id FROM river_job WHERE kind = $1 ORDER BY id OFFSET $2 LIMIT 1)`, tc.kind, i); err != nil {
					t.Fatal(err)
				}
			}
			check := func(step string, want ...string) {
				t.Helper()
				if got := jobs(); !slices.Equal(got, want) {
					t.Fatalf("%s: jobs %q, want %q", step, got, want)
				}
			}
			deliver()
			deliver()
			check("two deliveries while the job waits", "available -")
			run(0)
			deliver()
			check("a delivery while it runs", "running -", "available 0")
			deliver()
			deliver()
			check("more deliveries while it runs", "running -", "available 0")
			run(1) // the follower runs too (it snoozes on the lock while the first holds it)
			deliver()
			check("a delivery while both run", "running -", "running 0", "available 1")
		})
	}
}

// TestSyncAllEnqueuesBoundTenants: the periodic job enqueues one
// installation sync per tenant bound to an installation, and none for the
// others.
func TestSyncAllEnqueuesBoundTenants(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	inst := int64(777)
	bound, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "bound", Name: "Bound", GitHubInstallationID: &inst}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "local", Name: "Local"}, "test"); err != nil {
		t.Fatal(err)
	}
	w, err := jobs.NewWorker(&jobs.Deps{DB: env.App, Ingest: ingest.New(secretscan.New())}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	if _, _, err := w.Enqueue(ctx, jobs.SyncAllArgs{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		tenants := env.AdminStrings(t, `SELECT args->>'tenant_id' FROM river_job WHERE kind = 'github.sync_installation'`)
		if len(tenants) > 0 {
			if len(tenants) != 1 || tenants[0] != bound.ID {
				t.Fatalf("installation syncs enqueued for %v, want only %s", tenants, bound.ID)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no installation sync was enqueued")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
