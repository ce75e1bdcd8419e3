package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/codelotse/codelotse/pkg/postgres"
)

// DefaultSecretRescanEvery is how often the worker looks for tenants whose
// stored text waits for a rescan by their known secrets, when
// Deps.SecretRescanEvery is not set. It bounds how long the bare value of a
// newly learned secret can stay stored in text written before (plus the
// rescan itself).
const DefaultSecretRescanEvery = 30 * time.Second

// RescanSecretsArgs rewrites a tenant's stored text that holds the bare
// value of a secret learned after it was stored (pkg/ingest RedactKnown).
type RescanSecretsArgs struct {
	TenantID string `json:"tenant_id"`
}

func (RescanSecretsArgs) Kind() string { return "secrets.rescan" }
func (RescanSecretsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: unique, MaxAttempts: 10}
}

// RescanAllSecretsArgs enqueues a rescan for every tenant that learned a
// secret since its last one (secret_rescans, migration 0072); the worker
// schedules it every Deps.SecretRescanEvery, with or without GitHub.
type RescanAllSecretsArgs struct{}

func (RescanAllSecretsArgs) Kind() string { return "secrets.rescan_all" }
func (RescanAllSecretsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: unique, MaxAttempts: 3}
}

type rescanAllWorker struct {
	river.WorkerDefaults[RescanAllSecretsArgs]
	d *Deps
}

func (w *rescanAllWorker) Work(ctx context.Context, job *river.Job[RescanAllSecretsArgs]) error {
	return enqueueEach(ctx, w.d.DB.TenantsWithSecretRescans, func(tid string) river.JobArgs { return RescanSecretsArgs{TenantID: tid} })
}

// rescanActor is the audit log's actor of the worker's rescans.
var rescanActor = postgres.Actor{Label: "secret-rescan"}

type rescanWorker struct {
	river.WorkerDefaults[RescanSecretsArgs]
	d *Deps
}

// Timeout: a tenant of 400,000 chunks took 5-6 s on two cores
// (docs/benchmarks.md); leave room for far bigger ones.
func (w *rescanWorker) Timeout(*river.Job[RescanSecretsArgs]) time.Duration { return 30 * time.Minute }

func (w *rescanWorker) Work(ctx context.Context, job *river.Job[RescanSecretsArgs]) error {
	return w.d.RescanSecrets(ctx, job.Args.TenantID)
}

// RescanSecrets is the work of a RescanSecretsArgs job. While the tenant's
// ingestion keeps its known secrets busy, the job waits and tries again
// (snoozed, not failed); when a secret was learned during the rescan, it
// runs again at once for the rows read before that.
func (d *Deps) RescanSecrets(ctx context.Context, tid string) error {
	st, err := d.Ingest.RedactKnown(ctx, d.DB, tid, false, rescanActor)
	if errors.Is(err, postgres.ErrSecretsBusy) {
		return river.JobSnooze(10 * time.Second)
	}
	if err != nil {
		return err
	}
	if st.Requested {
		d.log().Info("secret rescan", "tenant", tid, "scanned", st.Scanned, "rewritten", st.Changed, "pending", st.Pending)
	}
	if st.Pending {
		return river.JobSnooze(time.Second)
	}
	return nil
}
