package main

import (
	"fmt"
	neturl "net/url"
	"strings"

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
	if err := checkRepoFlags(*full, *branch, *url); err != nil {
		return err
	}
	var r codelotse.Repository
	var err error
	err = e.inTenant(*slug, func(tx *postgres.Tx) error {
		r, err = e.ingester().AddRepository(e.ctx, tx, postgres.NewRepository{FullName: *full, DefaultBranch: *branch, Private: *private, URL: *url})
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

// checkRepoFlags refuses what GitHub would never send for a repository:
// "." or ".." or over 100 characters as a name part, a default branch git
// would not accept as a branch name, and a web URL that is not an absolute
// http(s) URL (it is shown to agents by list_repositories and linked from
// pages). The database checks only the OWNER/NAME shape.
func checkRepoFlags(full, branch, webURL string) error {
	owner, name, _ := strings.Cut(full, "/")
	for _, part := range []string{owner, name} {
		if part == "." || part == ".." || len(part) > 100 {
			return usageError{fmt.Sprintf("--full-name must be OWNER/NAME as on GitHub, not %q", full)}
		}
	}
	if branch == "" || len(branch) > 255 || strings.HasPrefix(branch, "-") || strings.HasPrefix(branch, "/") ||
		strings.HasSuffix(branch, "/") || strings.HasSuffix(branch, ".lock") || strings.Contains(branch, "..") ||
		strings.Contains(branch, "@{") || strings.ContainsFunc(branch, func(r rune) bool {
		return r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r)
	}) {
		return usageError{fmt.Sprintf("--default-branch %q is not a branch name git accepts", branch)}
	}
	if webURL != "" {
		u, err := neturl.Parse(webURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			return usageError{fmt.Sprintf("--url must be the repository's absolute http(s) web address, not %q", webURL)}
		}
	}
	return nil
}
