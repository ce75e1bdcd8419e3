package githubapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"golang.org/x/oauth2"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// Identity is the GitHub user who signed in.
type Identity struct {
	UserID int64
	Login  string
	// Name is the profile name; empty when the user has not set one.
	Name string
	// Email is the profile's public email or else the verified primary
	// email; empty when GitHub shows neither to the app (the app lacks the
	// "Email addresses" permission or the primary email is unverified).
	Email string
}

// Installation is one installation of the app that the user can reach, with
// the user's role in its account and the repositories the user can see
// through it. Tenants are bound to installations by ID and AccountID, never
// by login, because logins can be renamed and reused.
type Installation struct {
	ID, AccountID int64
	AccountLogin  string
	// AccountType is GitHub's account type: "Organization" or "User".
	AccountType string
	// Role is "admin" or "member" (codelotse.RoleAdmin, RoleMember).
	Role  string
	Repos []Repo
}

// Repo is a repository the user can see through an installation (SignIn),
// or one the installation can reach (InstallationClient.Repositories).
type Repo struct {
	ID            int64
	FullName      string
	DefaultBranch string
	// URL is the repository's web page.
	URL     string
	Private bool
	// Archived repositories are read-only on GitHub: their pull requests
	// and alerts no longer change.
	Archived bool
	// Permission is the user's highest permission: admin, maintain, push,
	// triage or pull. Empty from Repositories, which lists the app's
	// access, not a user's.
	Permission string
}

// SignIn finishes a sign-in: it exchanges the authorization code and the
// PKCE verifier for a user access token, reads the identity and the
// memberships with it, and forgets it. Either everything is read or an
// error is returned; a partial membership list is never returned, because
// the caller replaces its cache with the result.
//
// Requests are made one after another, not in parallel: GitHub's secondary
// rate limits punish concurrent bursts from one token.
func (c *Client) SignIn(ctx context.Context, code, verifier string) (id Identity, insts []Installation, err error) {
	if code == "" {
		return Identity{}, nil, codelotse.Errorf(codelotse.Invalid, "GitHub did not send an authorization code; start the sign-in again")
	}
	if verifier == "" {
		return Identity{}, nil, codelotse.Errorf(codelotse.Invalid, "this sign-in has no PKCE verifier; start the sign-in again")
	}
	var token string
	defer func() {
		if err != nil {
			// Whatever went wrong, none of these may reach an error string.
			err = redact(err, token, code, verifier, c.oauth.ClientSecret)
			id, insts = Identity{}, nil
		}
	}()

	tok, err := c.oauth.Exchange(context.WithValue(ctx, oauth2.HTTPClient, c.http), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return Identity{}, nil, exchangeError(err, time.Now())
	}
	token = tok.AccessToken

	gh := c.api(token)
	id, err = readIdentity(ctx, gh, c.maxPages)
	if err != nil {
		return Identity{}, nil, err
	}
	insts, err = readInstallations(ctx, gh, id.UserID, c.maxPages)
	if err != nil {
		return Identity{}, nil, err
	}
	return id, insts, nil
}

// api returns a go-github client for one user token. It is built per
// sign-in so that go-github's remembered rate-limit state and the token
// belong to this sign-in only.
func (c *Client) api(token string) *github.Client {
	base := c.http.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := &http.Client{
		Transport:     &bearer{token: token, scheme: c.apiURL.Scheme, host: c.apiURL.Host, base: base},
		CheckRedirect: c.http.CheckRedirect,
		Jar:           c.http.Jar,
		Timeout:       c.http.Timeout,
	}
	gh := github.NewClient(hc)
	// Set BaseURL directly instead of WithEnterpriseURLs, which would append
	// /api/v3/ to a test server's root; APIURL is used exactly as configured.
	apiURL := *c.apiURL
	gh.BaseURL = &apiURL
	uploadURL := *c.apiURL
	gh.UploadURL = &uploadURL
	gh.UserAgent = "codelotse"
	return gh
}

// bearer adds the user token to requests for the API host only. go-github's
// WithAuthToken adds it to every request the client sends, including one a
// redirect points at another host, which would hand the token to that host.
type bearer struct {
	token, scheme, host string
	base                http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == b.scheme && r.URL.Host == b.host {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

func readIdentity(ctx context.Context, gh *github.Client, maxPages int) (Identity, error) {
	u, resp, err := gh.Users.Get(ctx, "")
	if err != nil {
		return Identity{}, apiError("GET /user", resp, err, time.Now())
	}
	if u.GetID() == 0 || u.GetLogin() == "" {
		return Identity{}, codelotse.Wrap(codelotse.Unavailable, errors.New("githubapp: GET /user: the user has no id or login"),
			"GitHub returned an incomplete user; try again in a moment")
	}
	id := Identity{UserID: u.GetID(), Login: u.GetLogin(), Name: u.GetName(), Email: u.GetEmail()}
	if id.Email != "" {
		// GitHub only shows a public email that the user has verified.
		return id, nil
	}
	emails, err := paginate(ctx, "GET /user/emails", maxPages, func(opts *github.ListOptions) ([]*github.UserEmail, *github.Response, error) {
		return gh.Users.ListEmails(ctx, opts)
	})
	if err != nil {
		if optional(err) {
			// The app may not have the "Email addresses" permission; an
			// identity without an email is still an identity.
			return id, nil
		}
		return Identity{}, err
	}
	for _, e := range emails {
		if e.GetPrimary() && e.GetVerified() {
			id.Email = e.GetEmail()
			break
		}
	}
	return id, nil
}

func readInstallations(ctx context.Context, gh *github.Client, userID int64, maxPages int) ([]Installation, error) {
	raw, err := paginate(ctx, "GET /user/installations", maxPages, func(opts *github.ListOptions) ([]*github.Installation, *github.Response, error) {
		return gh.Apps.ListUserInstallations(ctx, opts)
	})
	if err != nil {
		return nil, err
	}
	insts := make([]Installation, 0, len(raw))
	for _, in := range raw {
		if in.SuspendedAt != nil {
			// A suspended installation gives the app no access, and its
			// repositories cannot be listed; it grants nothing.
			continue
		}
		acct := in.GetAccount()
		if in.GetID() == 0 || acct.GetID() == 0 {
			return nil, codelotse.Wrap(codelotse.Unavailable, errors.New("githubapp: GET /user/installations: an installation has no id or account"),
				"GitHub returned an incomplete installation; try again in a moment")
		}
		inst := Installation{
			ID:           in.GetID(),
			AccountID:    acct.GetID(),
			AccountLogin: acct.GetLogin(),
			AccountType:  acct.GetType(),
		}
		inst.Role, err = role(ctx, gh, inst, userID)
		if err != nil {
			return nil, err
		}
		inst.Repos, err = readRepos(ctx, gh, inst.ID, maxPages)
		if err != nil {
			return nil, err
		}
		insts = append(insts, inst)
	}
	return insts, nil
}

// role is the user's role in the installation's account. Only an active
// organization owner or the owner of a personal account is an admin, because
// an admin sees every repository of the tenant. Everyone else who can reach
// the installation is a member and sees only the repositories listed for
// them.
func role(ctx context.Context, gh *github.Client, inst Installation, userID int64) (string, error) {
	switch inst.AccountType {
	case "User":
		if inst.AccountID == userID {
			return string(codelotse.RoleAdmin), nil
		}
		return string(codelotse.RoleMember), nil
	case "Organization":
	default:
		return string(codelotse.RoleMember), nil
	}
	op := "GET /user/memberships/orgs/" + inst.AccountLogin
	// Logins come from GitHub and are plain, but checking keeps a strange
	// one from addressing a different endpoint with the user's token.
	if l := inst.AccountLogin; l == "" || l == "." || l == ".." || strings.ContainsAny(l, "/\\") {
		return "", codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: installation %d has an invalid account login", inst.ID),
			"GitHub returned an incomplete installation; try again in a moment")
	}
	m, resp, err := gh.Organizations.GetOrgMembership(ctx, "", url.PathEscape(inst.AccountLogin))
	if err != nil {
		err = apiError(op, resp, err, time.Now())
		if optional(err) {
			// 404: an outside collaborator, who reaches the installation
			// through repositories only. 403: the app lacks the organization
			// "Members" permission. Either way the least privilege applies.
			return string(codelotse.RoleMember), nil
		}
		return "", err
	}
	if m.GetState() == "active" && m.GetRole() == "admin" {
		return string(codelotse.RoleAdmin), nil
	}
	return string(codelotse.RoleMember), nil
}

func readRepos(ctx context.Context, gh *github.Client, installationID int64, maxPages int) ([]Repo, error) {
	op := fmt.Sprintf("GET /user/installations/%d/repositories", installationID)
	raw, err := paginate(ctx, op, maxPages, func(opts *github.ListOptions) ([]*github.Repository, *github.Response, error) {
		list, resp, err := gh.Apps.ListUserRepos(ctx, installationID, opts)
		if list == nil {
			return nil, resp, err
		}
		return list.Repositories, resp, err
	})
	if err != nil {
		return nil, err
	}
	repos := make([]Repo, 0, len(raw))
	for _, r := range raw {
		if r.GetID() == 0 {
			continue
		}
		repos = append(repos, Repo{
			ID:            r.GetID(),
			FullName:      r.GetFullName(),
			DefaultBranch: r.GetDefaultBranch(),
			URL:           r.GetHTMLURL(),
			Private:       r.GetPrivate(),
			Archived:      r.GetArchived(),
			Permission:    permission(r.Permissions),
		})
	}
	return repos, nil
}

// permissionOrder lists GitHub's repository permissions, highest first.
var permissionOrder = []string{"admin", "maintain", "push", "triage", "pull"}

// permission is the highest permission GitHub reports. A repository in this
// list is one the user has explicit access to, so without a permissions
// object it is at least readable.
func permission(p map[string]bool) string {
	for _, name := range permissionOrder {
		if p[name] {
			return name
		}
	}
	return "pull"
}

// paginate follows GitHub's Link headers until there is no next page. It
// stops with an error after maxPages pages, or if the next page does not
// move forward, rather than return a silently truncated list.
func paginate[T any](ctx context.Context, op string, maxPages int, fetch func(*github.ListOptions) ([]T, *github.Response, error)) ([]T, error) {
	opts := &github.ListOptions{PerPage: perPage}
	var all []T
	for fetched := 1; ; fetched++ {
		items, resp, err := fetch(opts)
		if err != nil {
			return nil, apiError(fmt.Sprintf("%s (page %d)", op, fetched), resp, err, time.Now())
		}
		all = append(all, items...)
		if resp == nil || resp.NextPage == 0 {
			return all, nil
		}
		current := opts.Page
		if current == 0 {
			current = 1
		}
		if resp.NextPage <= current {
			return nil, codelotse.Wrap(codelotse.Unavailable,
				fmt.Errorf("githubapp: %s: page %d links back to page %d", op, current, resp.NextPage),
				"GitHub returned an inconsistent list; try again in a moment")
		}
		if fetched >= maxPages {
			return nil, codelotse.Wrap(codelotse.Unavailable,
				fmt.Errorf("githubapp: %s: more than %d pages; stopped rather than keep a partial list", op, maxPages),
				"GitHub returned more installations or repositories than CodeLotse reads in one sign-in")
		}
		opts.Page = resp.NextPage
	}
}

// optional reports whether a failed read may be skipped: GitHub answered
// 403 or 404 for a reason other than a rate limit, meaning the app was not
// granted that permission or the user has no such membership.
func optional(err error) bool {
	if errors.Is(err, ErrRateLimited) || errors.Is(err, ErrSignInRejected) {
		return false
	}
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil {
		return false
	}
	return er.Response.StatusCode == http.StatusForbidden || er.Response.StatusCode == http.StatusNotFound
}
