package main

import (
	"fmt"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// cmdRepoAdd: cltctl repo add --tenant SLUG --full-name OWNER/NAME [--private] [--default-branch B] [--url URL]
func cmdRepoAdd(e *env, args []string) error {
	fs := e.flags("repo add")
	slug := fs.String("tenant", "", "tenant slug")
	full := fs.String("full-name", "", "OWNER/NAME")
	private := fs.Bool("private", false, "the repository is private")
	branch := fs.String("default-branch", "main", "default branch")
	url := fs.String("url", "", "web URL (default https://github.com/OWNER/NAME)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "full-name", *full); err != nil {
		return err
	}
	var r codelotse.Repository
	var err error
	err = e.inTenant(*slug, func(tx *postgres.Tx) error {
		r, err = e.ingest.AddRepository(e.ctx, tx, postgres.NewRepository{FullName: *full, DefaultBranch: *branch, Private: *private, URL: *url})
		if err != nil {
			return err
		}
		return tx.AuditRepositoryAdded(e.ctx, r, operator)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "repository %s has id %d\n", r.FullName, r.ID)
	return nil
}

// cmdRepoGrant: cltctl repo grant --tenant SLUG --email EMAIL --full-name OWNER/NAME
func cmdRepoGrant(e *env, args []string) error {
	fs := e.flags("repo grant")
	slug := fs.String("tenant", "", "tenant slug")
	email := fs.String("email", "", "user email")
	full := fs.String("full-name", "", "OWNER/NAME")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "email", *email, "full-name", *full); err != nil {
		return err
	}
	err := e.inTenant(*slug, func(tx *postgres.Tx) error {
		u, err := tx.UserByEmail(e.ctx, *email)
		if err != nil {
			return err
		}
		r, err := tx.RepositoryByName(e.ctx, *full)
		if err != nil {
			return err
		}
		return tx.GrantRepositoryAudited(e.ctx, u, r, operator)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s can view %s\n", *email, *full)
	return nil
}
