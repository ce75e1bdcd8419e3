package githubapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/google/go-github/v62/github"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// ErrMissingPermission is matched (errors.Is) when the installation was not
// granted a permission a membership refresh needs (GitHub answers 403
// "Resource not accessible by integration"). Retrying does not help until
// the organisation accepts the permission; until then memberships are
// refreshed at sign-in only.
var ErrMissingPermission = errors.New("the GitHub App installation lacks a permission")

// Memberships is who can see what through an installation, read with the
// installation's own token: the organisation's members with their role and
// every repository each GitHub user can read, whether the access comes
// from the organisation's base permission, a team, a direct grant or an
// outside-collaborator grant. Private and public repositories are treated
// alike: a public repository counts for a user only when GitHub lists
// them as able to read it, as the sign-in listing does.
type Memberships struct {
	AccountID    int64
	AccountLogin string
	AccountType  string
	// BasePermission is the organisation's default repository permission
	// (none, read, write, admin), or "" when the installation may not read
	// it (no "Administration: read"); then every repository's full
	// collaborator list is read instead.
	BasePermission string
	// Repos are the installation's repositories.
	Repos []Repo
	// Users maps a GitHub user id to that user's access. A user who is
	// neither a member nor a collaborator of any repository is absent.
	Users map[int64]*Access
}

// Access is one GitHub user's access through the installation.
type Access struct {
	Login string
	// Admin: an organisation owner, or the owner of a personal account.
	Admin bool
	// Member: an active member of the organisation (false for outside
	// collaborators).
	Member bool
	// RepoIDs are GitHub repository ids the user can read, sorted.
	RepoIDs []int64
}

// readPermissions are GitHub's repository permissions that allow reading.
var readPermissions = []string{"admin", "maintain", "push", "triage", "pull"}

// Memberships reads the installation's account, repositories, members and
// collaborators. Either everything is read or an error is returned: the
// caller replaces its caches with the result, and a partial list would
// take access away from everyone on the pages not read.
//
// For an organisation it costs, with 100 items a page: 1 request for the
// installation (as the app), 1 for the organisation, ⌈R/100⌉ for the
// repositories, ⌈M/100⌉ + ⌈A/100⌉ for members and owners, and one listing
// per repository: outside collaborators when the base permission lets
// every member read (usually one page each), otherwise all collaborators
// (⌈collaborators/100⌉ pages each). docs/github-app.md has the budget.
func (c *InstallationClient) Memberships(ctx context.Context) (*Memberships, error) {
	if err := c.valid(); err != nil {
		return nil, err
	}
	in, err := c.installationInfo(ctx)
	if err != nil {
		return nil, err
	}
	acct := in.GetAccount()
	m := &Memberships{AccountID: acct.GetID(), AccountLogin: acct.GetLogin(), AccountType: acct.GetType(), Users: map[int64]*Access{}}
	if !repoNamePart(m.AccountLogin) {
		return nil, incomplete(fmt.Sprintf("GET /app/installations/%d", c.id), "the account login is not valid")
	}
	if m.Repos, err = c.Repositories(ctx); err != nil {
		return nil, missingPermission(err, "Metadata")
	}
	user := func(u *github.User) *Access {
		a := m.Users[u.GetID()]
		if a == nil {
			a = &Access{Login: u.GetLogin()}
			m.Users[u.GetID()] = a
		}
		return a
	}
	everyone := false // every member reads every repository
	affiliation := "all"
	if m.AccountType == "Organization" {
		org := "orgs/" + m.AccountLogin
		var o github.Organization
		if err := c.app.getJSON(ctx, &request{op: "GET /" + org, url: c.app.endpoint(org, nil), cred: c, limit: &c.st.limit}, &o); err != nil {
			return nil, missingPermission(err, "Members")
		}
		m.BasePermission = o.GetDefaultRepoPermission()
		for _, role := range []string{"admin", "member"} {
			members, err := list(ctx, c, "GET /"+org+"/members?role="+role, c.app.endpoint(org+"/members", url.Values{
				"role": {role}, "per_page": {strconv.Itoa(perPage)},
			}), decodeList[*github.User], nil)
			if err != nil {
				return nil, missingPermission(err, "Members")
			}
			for _, u := range members {
				if u.GetID() == 0 {
					return nil, incomplete("GET /"+org+"/members", "a member has no id")
				}
				a := user(u)
				a.Member, a.Admin = true, a.Admin || role == "admin"
			}
		}
		switch m.BasePermission {
		case "read", "write", "admin":
			// Members read everything; only outside collaborators need
			// a per-repository listing, which is usually one short page.
			everyone, affiliation = true, "outside"
		}
	} else if m.AccountType == "User" {
		user(acct).Admin = true
	}
	for _, r := range m.Repos {
		path, err := c.repoPath(r.FullName)
		if err != nil {
			return nil, err
		}
		path += "/collaborators"
		collabs, err := list(ctx, c, "GET /"+path+"?affiliation="+affiliation, c.app.endpoint(path, url.Values{
			"affiliation": {affiliation}, "per_page": {strconv.Itoa(perPage)},
		}), decodeList[*github.User], nil)
		if err != nil {
			if codelotse.ErrorCode(err) == codelotse.NotFound {
				continue // removed since the repositories were listed
			}
			return nil, missingPermission(err, "Metadata")
		}
		for _, u := range collabs {
			if u.GetID() == 0 {
				return nil, incomplete("GET /"+path, "a collaborator has no id")
			}
			if !canRead(u.GetPermissions()) {
				continue
			}
			a := user(u)
			a.RepoIDs = append(a.RepoIDs, r.ID)
		}
	}
	for _, a := range m.Users {
		if a.Admin || everyone && a.Member {
			a.RepoIDs = a.RepoIDs[:0]
			for _, r := range m.Repos {
				a.RepoIDs = append(a.RepoIDs, r.ID)
			}
		}
		slices.Sort(a.RepoIDs)
		a.RepoIDs = slices.Compact(a.RepoIDs)
	}
	return m, nil
}

// canRead: a collaborator listed without a permissions object is at least
// readable, as GitHub lists only people with access.
func canRead(p map[string]bool) bool {
	if p == nil {
		return true
	}
	for _, name := range readPermissions {
		if p[name] {
			return true
		}
	}
	return false
}

// installationInfo reads the installation with the app's JWT.
func (c *InstallationClient) installationInfo(ctx context.Context) (*github.Installation, error) {
	op := fmt.Sprintf("GET /app/installations/%d", c.id)
	var in github.Installation
	if err := c.app.getJSON(ctx, &request{
		op:    op,
		url:   c.app.endpoint(fmt.Sprintf("app/installations/%d", c.id), nil),
		cred:  appCredential{c.app},
		limit: &c.app.appLimit,
	}, &in); err != nil {
		return nil, installationError(c.id, err)
	}
	if in.GetAccount().GetID() == 0 || in.GetAccount().GetLogin() == "" {
		return nil, incomplete(op, "the installation has no account")
	}
	return &in, nil
}

// missingPermission marks a 403 that is not a rate limit as the
// installation lacking perm.
func missingPermission(err error, perm string) error {
	var se *statusError
	if !errors.As(err, &se) || se.Status != http.StatusForbidden || se.rl != nil || errors.Is(err, ErrNotInstalled) {
		return err
	}
	return codelotse.Wrap(codelotse.Forbidden, fmt.Errorf("%w (%s: read): %w", ErrMissingPermission, perm, err),
		fmt.Sprintf("the GitHub App installation lacks the %q permission (read); memberships are refreshed at sign-in only", perm))
}
