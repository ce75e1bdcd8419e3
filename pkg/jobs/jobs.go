// Package jobs runs CodeLotse's background work on River (jobs in
// PostgreSQL): syncing a tenant's GitHub installation, its repositories'
// pull requests, reviews, review comments and code-scanning alerts, and
// indexing default branches. It is the only package that imports River.
//
// Jobs are idempotent (every write is an upsert of what GitHub says now)
// and unique per repository while pending or running, so several workers
// can run at once: River hands a job to one worker, and a session advisory
// lock per repository keeps two syncs of one repository apart even if a
// duplicate slipped in. A failing repository fails its own job only. A job
// asked for while the same job runs is not dropped but follows it (see
// insertFollowing): the running job may have read GitHub before the change
// that asked for it.
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/codelotse/codelotse/pkg/logfilter"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// Queue is the queue every CodeLotse job runs on.
const Queue = "github"

// unique makes a job unique by its arguments while it waits or runs.
var unique = river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}}

// follower is a job's arguments that can follow a running job of the same
// arguments: the same work, distinct from it for River's uniqueness.
type follower interface {
	river.JobArgs
	following(running int64) river.JobArgs
}

// maxFollows bounds the chain insertFollowing walks: one link per job of
// the same work running at once, which the worker's per-repository lock
// keeps to a few (the others snooze, listed as scheduled).
const maxFollows = 64

// insertFollowing inserts args with insert. When River skips it as a
// duplicate of a job that is running, it inserts the same work once more,
// to follow that job: the running job may have read GitHub before the
// change that asked for this one (a review submitted, a member removed, a
// push), and River lists a finished job as running until it records
// completions in a batch. Deliveries while one job runs coalesce into one
// follower; a follower waits for the repository's lock like any job. A
// duplicate of a waiting job is skipped: that job reads GitHub later.
func insertFollowing(args river.JobArgs, insert func(river.JobArgs) (*rivertype.JobInsertResult, error)) (inserted bool, err error) {
	for range maxFollows {
		res, err := insert(args)
		if err != nil {
			return false, err
		}
		if !res.UniqueSkippedAsDuplicate {
			return true, nil
		}
		f, ok := args.(follower)
		if !ok || res.Job.State != rivertype.JobStateRunning {
			return false, nil
		}
		args = f.following(res.Job.ID)
	}
	return false, fmt.Errorf("jobs: %s: more than %d of the same job running", args.Kind(), maxFollows)
}

// enqueue is insertFollowing for a job that enqueues another, with the
// client working it (or Deps.Enqueue).
func (d *Deps) enqueue(ctx context.Context, args river.JobArgs) error {
	if d.Enqueue != nil {
		return d.Enqueue(ctx, args)
	}
	client := postgres.RiverClientFromContext(ctx)
	_, err := insertFollowing(args, func(a river.JobArgs) (*rivertype.JobInsertResult, error) {
		return client.Insert(ctx, a, nil)
	})
	return err
}

// SyncInstallationArgs syncs a tenant's installation: its account and the
// repositories it can see (added, removed, renamed, private flag), then
// enqueues a repository sync for each.
type SyncInstallationArgs struct {
	TenantID string `json:"tenant_id"`
	// Follows is the running job this one follows (insertFollowing).
	Follows int64 `json:"follows,omitempty"`
}

func (a SyncInstallationArgs) following(id int64) river.JobArgs { a.Follows = id; return a }

func (SyncInstallationArgs) Kind() string { return "github.sync_installation" }
func (SyncInstallationArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: unique, MaxAttempts: 10}
}

// SyncRepositoryArgs syncs one repository's pull requests, reviews, review
// comments and code-scanning alerts, then enqueues indexing of its default
// branch when its head moved.
type SyncRepositoryArgs struct {
	TenantID     string `json:"tenant_id"`
	RepositoryID int64  `json:"repository_id"`
	// AfterIndex marks the sync an index job enqueues once the base index
	// moved, to rebuild the pull-request overlays against it. It makes the
	// job unique apart from ordinary syncs: River may still list the sync
	// that enqueued the index job as running (completions are recorded in
	// batches), and a duplicate of it would be dropped, leaving the
	// overlays unbuilt.
	AfterIndex bool `json:"after_index,omitempty"`
	// Pull is a pull request to read even when it is closed and its
	// updated_at did not move (a webhook said it changed).
	Pull int `json:"pull,omitempty"`
	// Follows is the running job this one follows (insertFollowing).
	Follows int64 `json:"follows,omitempty"`
}

func (a SyncRepositoryArgs) following(id int64) river.JobArgs { a.Follows = id; return a }

func (SyncRepositoryArgs) Kind() string { return "github.sync_repository" }
func (SyncRepositoryArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: unique, MaxAttempts: 10}
}

// IndexRepositoryArgs indexes a repository's default branch from the
// repository archive at its head commit (the same index as cltctl index).
type IndexRepositoryArgs struct {
	TenantID     string `json:"tenant_id"`
	RepositoryID int64  `json:"repository_id"`
	// Commit is the pushed head a webhook asked for, if any. The job
	// indexes whatever the head is when it runs (under the repository's
	// lock); the commit only makes the job distinct: unique by its
	// arguments, a push while the previous push's job is running (or
	// still listed as running: River records completions in batches)
	// was dropped as a duplicate, and its commit waited for the next
	// periodic sync. A job waiting to run reads the newest head anyway,
	// so a repeated delivery of the same push is still one job.
	Commit string `json:"commit,omitempty"`
	// Follows is the running job this one follows (insertFollowing): the
	// same commit asked for again while its job runs, or no commit.
	Follows int64 `json:"follows,omitempty"`
}

func (a IndexRepositoryArgs) following(id int64) river.JobArgs { a.Follows = id; return a }

func (IndexRepositoryArgs) Kind() string { return "github.index_repository" }
func (IndexRepositoryArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: unique, MaxAttempts: 5}
}

// SyncAllArgs enqueues an installation sync for every tenant bound to an
// installation; the worker schedules it periodically, so data that webhooks
// missed (lost deliveries, downtime) is caught up.
type SyncAllArgs struct{}

func (SyncAllArgs) Kind() string { return "github.sync_all" }
func (SyncAllArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: unique, MaxAttempts: 3}
}

// RefreshMembershipsArgs refreshes a tenant's GitHub membership caches
// (tenant_memberships, repo_memberships) from its installation: members
// with their role and the repositories each can read.
type RefreshMembershipsArgs struct {
	TenantID string `json:"tenant_id"`
	// Follows is the running job this one follows (insertFollowing).
	Follows int64 `json:"follows,omitempty"`
}

func (a RefreshMembershipsArgs) following(id int64) river.JobArgs { a.Follows = id; return a }

func (RefreshMembershipsArgs) Kind() string { return "github.refresh_memberships" }
func (RefreshMembershipsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: unique, MaxAttempts: 5}
}

// RefreshAllMembershipsArgs enqueues a membership refresh for every tenant
// bound to an installation; the worker schedules it periodically
// (GITHUB_MEMBERSHIP_REFRESH_INTERVAL), well inside the 24-hour bound.
type RefreshAllMembershipsArgs struct{}

func (RefreshAllMembershipsArgs) Kind() string { return "github.refresh_memberships_all" }
func (RefreshAllMembershipsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: unique, MaxAttempts: 3}
}

// Migrate creates or updates River's tables, owned by the owner role: it
// connects with adminURL and acts as owner for the whole run.
func Migrate(ctx context.Context, adminURL, ownerRole string) error {
	if err := postgres.MigrateRiver(ctx, adminURL, ownerRole); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}

// Client enqueues jobs (the API's webhooks, cltctl) and, when started with
// workers, works them (apps/worker).
type Client struct {
	river *postgres.RiverClient
}

// NewInsertOnly returns a client that only enqueues.
func NewInsertOnly(db *postgres.DB, logger *slog.Logger) (*Client, error) {
	rc, err := db.NewRiverClient(&river.Config{Logger: quiet(logger)})
	if err != nil {
		return nil, err
	}
	return &Client{river: rc}, nil
}

// Enqueue inserts a job; a duplicate of a waiting or running job is not
// inserted again (unique by arguments). It reports whether it was new.
func (c *Client) Enqueue(ctx context.Context, args river.JobArgs) (inserted bool, id int64, err error) {
	res, err := c.river.Insert(ctx, args, nil)
	if err != nil {
		return false, 0, err
	}
	return !res.UniqueSkippedAsDuplicate, res.Job.ID, nil
}

// EnqueueTx inserts a job in the caller's transaction, so it exists exactly
// when the caller's change does (webhook deliveries). A job asked for while
// the same job runs follows it (insertFollowing).
func (c *Client) EnqueueTx(ctx context.Context, tx *postgres.Tx, args river.JobArgs) (bool, error) {
	return insertFollowing(args, func(a river.JobArgs) (*rivertype.JobInsertResult, error) {
		return tx.InsertJob(ctx, c.river, a)
	})
}

// quiet passes only warnings and errors (see pkg/logfilter).
func quiet(l *slog.Logger) *slog.Logger { return logfilter.AtLeast(l, slog.LevelWarn) }

// EnqueueInstallationSync implements httpserver.Enqueuer.
func (c *Client) EnqueueInstallationSync(ctx context.Context, tx *postgres.Tx) error {
	_, err := c.EnqueueTx(ctx, tx, SyncInstallationArgs{TenantID: tx.TenantID()})
	return err
}

// EnqueueRepositorySync implements httpserver.Enqueuer.
func (c *Client) EnqueueRepositorySync(ctx context.Context, tx *postgres.Tx, repoID int64) error {
	_, err := c.EnqueueTx(ctx, tx, SyncRepositoryArgs{TenantID: tx.TenantID(), RepositoryID: repoID})
	return err
}

// EnqueuePullSync implements httpserver.Enqueuer.
func (c *Client) EnqueuePullSync(ctx context.Context, tx *postgres.Tx, repoID int64, number int) error {
	_, err := c.EnqueueTx(ctx, tx, SyncRepositoryArgs{TenantID: tx.TenantID(), RepositoryID: repoID, Pull: number})
	return err
}

// EnqueueIndex implements httpserver.Enqueuer.
func (c *Client) EnqueueIndex(ctx context.Context, tx *postgres.Tx, repoID int64, commit string) error {
	if !isCommitSHA(commit) {
		commit = "" // a deleted ref's zeros, or no commit: the head decides
	}
	_, err := c.EnqueueTx(ctx, tx, IndexRepositoryArgs{TenantID: tx.TenantID(), RepositoryID: repoID, Commit: commit})
	return err
}

// isCommitSHA reports whether s is a commit id (40 or 64 hex digits, not
// all zeros).
func isCommitSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 || strings.Trim(s, "0") == "" {
		return false
	}
	return strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// EnqueueMembershipRefresh implements httpserver.Enqueuer.
func (c *Client) EnqueueMembershipRefresh(ctx context.Context, tx *postgres.Tx) error {
	_, err := c.EnqueueTx(ctx, tx, RefreshMembershipsArgs{TenantID: tx.TenantID()})
	return err
}

// Pending counts a tenant's GitHub jobs that have not finished, and those
// that failed for good since since (for cltctl github sync --wait).
func Pending(ctx context.Context, db *postgres.DB, tenantID string, since time.Time) (pending, failed int, err error) {
	return db.PendingJobs(ctx, Queue, tenantID, since)
}
