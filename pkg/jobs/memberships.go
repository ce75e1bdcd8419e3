package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp"
	"github.com/codelotse/codelotse/pkg/postgres"
)

var membershipActor = postgres.Actor{Label: "github-membership-refresh"}

type membershipWorker struct {
	river.WorkerDefaults[RefreshMembershipsArgs]
	d *Deps
}

// Timeout: a 3,000-repository organisation takes a few thousand requests.
func (w *membershipWorker) Timeout(*river.Job[RefreshMembershipsArgs]) time.Duration {
	return 30 * time.Minute
}

func (w *membershipWorker) Work(ctx context.Context, job *river.Job[RefreshMembershipsArgs]) error {
	return w.d.RefreshMemberships(ctx, job.Args.TenantID)
}

// RefreshMemberships is the work of a RefreshMembershipsArgs job: read who
// can see what through the installation, then replace the caches of every
// user of the tenant with a GitHub id in one transaction. An installation
// that lacks a permission the refresh needs is recorded (the admin page
// shows it) and the caches are left alone: sign-in keeps refreshing them
// and the 24-hour bound applies, as without the worker. A rate limit
// snoozes the job until GitHub's reset; the refresh then starts over.
func (d *Deps) RefreshMemberships(ctx context.Context, tid string) error {
	unlock, err := d.LockTenant(ctx, "memberships", tid)
	if err != nil {
		return err
	}
	defer unlock()
	inst, g, err := d.installation(ctx, tid)
	if err != nil {
		return err
	}
	now := time.Now
	if d.Now != nil {
		now = d.Now
	}
	// Webhooks that expire a user after this are newer than what is read.
	readSince, err := d.DB.Now(ctx)
	if err != nil {
		return err
	}
	m, err := inst.Memberships(ctx)
	if errors.Is(err, githubapp.ErrMissingPermission) {
		d.Logger.Warn("membership refresh: the installation lacks a permission; memberships are refreshed at sign-in only",
			"tenant", g.Slug, "err", err)
		return d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
			return tx.RecordMembershipRefresh(ctx, postgres.MembershipRefresh{
				State: "missing_permission", Detail: codelotse.ErrorMessage(err), FinishedAt: now()})
		})
	}
	if err != nil {
		return rateLimited(err)
	}
	if g.AccountID != nil && *g.AccountID != m.AccountID {
		return river.JobCancel(fmt.Errorf("installation %d now belongs to another account (%d, bound to %d)", *g.InstallationID, m.AccountID, *g.AccountID))
	}
	members := 0
	for _, a := range m.Users {
		if a.Member || a.Admin {
			members++
		}
	}
	return d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		if err := tx.SetTenantGitHubAccount(ctx, m.AccountID); err != nil {
			return err
		}
		// Repositories the installation sync has not stored yet are
		// stored now, as sign-in does, so nobody's access waits for it.
		ids := make(map[int64]int64, len(m.Repos))
		for _, r := range m.Repos {
			id, err := d.Ingest.UpsertGitHubRepository(ctx, tx, r.ID, r.FullName, r.DefaultBranch, r.URL, r.Private, false)
			if c := codelotse.ErrorCode(err); c == codelotse.Invalid || c == codelotse.Conflict {
				// A name that looks like a secret is not stored (as in the
				// installation sync); a new repository whose name a stored
				// one still holds waits for the installation sync. Nobody
				// is granted either.
				continue
			}
			if err != nil {
				return err
			}
			ids[r.ID] = id
		}
		access := make(map[int64]postgres.GitHubAccess, len(m.Users))
		for uid, a := range m.Users {
			ga := postgres.GitHubAccess{Role: codelotse.RoleMember, RepoIDs: make([]int64, 0, len(a.RepoIDs))}
			if a.Admin {
				ga.Role = codelotse.RoleAdmin
			}
			for _, gid := range a.RepoIDs {
				if id, ok := ids[gid]; ok {
					ga.RepoIDs = append(ga.RepoIDs, id)
				}
			}
			access[uid] = ga
		}
		at := now()
		refreshed, expired, err := tx.ApplyGitHubMemberships(ctx, access, at, readSince, membershipActor)
		if err != nil {
			return err
		}
		return tx.RecordMembershipRefresh(ctx, postgres.MembershipRefresh{State: "ok", Members: members,
			Repositories: len(m.Repos), UsersRefreshed: refreshed, UsersExpired: expired, FinishedAt: at})
	})
}

type membershipAllWorker struct {
	river.WorkerDefaults[RefreshAllMembershipsArgs]
	d *Deps
}

func (w *membershipAllWorker) Work(ctx context.Context, job *river.Job[RefreshAllMembershipsArgs]) error {
	return enqueueEach(ctx, w.d.DB.TenantsWithInstallation, func(tid string) river.JobArgs { return RefreshMembershipsArgs{TenantID: tid} })
}
