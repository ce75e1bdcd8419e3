package main

import (
	"context"
	"fmt"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/jobs"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// cmdGitHubSync: cltctl github sync --tenant SLUG [--repo OWNER/NAME] [--wait] [--timeout D]
//
// Enqueues a sync of the tenant's installation (or of one repository) for
// the worker; with --wait it returns when the tenant's GitHub jobs have
// finished, and fails if one of them failed.
func cmdGitHubSync(e *env, args []string) error {
	fs := e.flags("github sync")
	slug := fs.String("tenant", "", "tenant slug")
	repo := fs.String("repo", "", "only this repository (OWNER/NAME)")
	wait := fs.Bool("wait", false, "wait until the sync has finished (a worker must be running)")
	timeout := fs.Duration("timeout", 30*time.Minute, "with --wait: give up after this long")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug); err != nil {
		return err
	}
	db, err := e.admin()
	if err != nil {
		return err
	}
	defer db.Close()
	tid, err := e.tenant(db, *slug)
	if err != nil {
		return err
	}
	client, err := jobs.NewInsertOnly(db, nil)
	if err != nil {
		return err
	}
	start := time.Now().Add(-time.Second)
	err = db.InTenant(e.ctx, tid, func(tx *postgres.Tx) error {
		g, err := tx.GetTenantGitHub(e.ctx)
		if err != nil {
			return err
		}
		if g.InstallationID == nil {
			return codelotse.Errorf(codelotse.Invalid, "tenant %s is not bound to a GitHub installation (cltctl tenant create --github-installation ID)", *slug)
		}
		if *repo == "" {
			return client.EnqueueInstallationSync(e.ctx, tx)
		}
		r, err := tx.RepositoryByName(e.ctx, *repo)
		if err != nil {
			return err
		}
		return client.EnqueueRepositorySync(e.ctx, tx, r.ID)
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "sync enqueued")
	if !*wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(e.ctx, *timeout)
	defer cancel()
	for {
		pending, failed, err := jobs.Pending(ctx, db, tid, start)
		if err != nil {
			return err
		}
		if pending == 0 {
			if failed > 0 {
				return codelotse.Errorf(codelotse.Unavailable, "sync finished with %d failed job(s); see the worker's log", failed)
			}
			fmt.Fprintln(e.stdout, "sync finished")
			return nil
		}
		select {
		case <-ctx.Done():
			return codelotse.Errorf(codelotse.Unavailable, "sync still running after %s (is a worker running?)", *timeout)
		case <-time.After(300 * time.Millisecond):
		}
	}
}
