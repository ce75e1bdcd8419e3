//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/codelotse/codelotse/e2e/oidcop"
	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

// TestBrowserOIDCSignIn signs in through a real OpenID Provider running in
// the test (zitadel's op, with a groups claim), creates a token on the page
// and uses it; a later sign-in with other groups replaces the snapshot on
// that token (401 once no group maps); a provider that omits the groups
// claim gets a clear page.
func TestBrowserOIDCSignIn(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	op := oidcop.Start(t, oidcop.Options{
		RedirectURIs: []string{s.url + "/auth/oidc/callback"},
		Users:        []oidcop.User{{Subject: "alice", Email: "alice@acme.test", EmailVerified: true, Name: "Alice", Groups: []string{"eng"}}},
	})
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled")
	s.cltctl("repo", "add", "--tenant", "acme", "--full-name", "acme/api")
	s.cltctl("repo", "add", "--tenant", "acme", "--full-name", "acme/hidden")
	s.cltctl("idp", "add", "--tenant", "acme", "--issuer", op.Issuer(), "--client-id", op.ClientID(), "--client-secret", op.ClientSecret())
	s.cltctl("idp", "map", "--tenant", "acme", "--group", "eng", "--role", "member", "--repo", "acme/api")

	ctx := browser(t)
	op.SignInAs("alice")
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/t/acme/login"), chromedp.WaitVisible(chromedp.CSS(`#name`)),
		chromedp.SendKeys(chromedp.CSS(`#name`), "oidc laptop"),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`#secret`))); err != nil {
		t.Fatalf("OIDC sign-in and token creation: %v\n%s", err, s.logs.String())
	}
	if text := pageText(t, ctx); !strings.Contains(text, "alice@acme.test") || strings.Contains(text, "24 hours") {
		t.Errorf("signed-in page (an OIDC user gets no GitHub note):\n%s", text)
	}
	secret, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`#secret`)))
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, s.url+"/mcp", secret, "")
	text, isErr := call(t, cs, "list_repositories", nil)
	if isErr || !strings.Contains(text, "acme/api") || strings.Contains(text, "acme/hidden") || !strings.Contains(text, `"source":"oidc"`) {
		t.Fatalf("token of an OIDC session: isError=%v %s", isErr, text)
	}

	// Alice moves to another group; her next sign-in replaces the snapshot
	// on her token, which no mapping covers any more.
	op.SetUserGroups("alice", []string{"contractors"})
	op.SignInAs("alice")
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/logout"), chromedp.Click(chromedp.CSS(`main form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#tokens`)), chromedp.Navigate(s.url+"/t/acme/login"), chromedp.WaitVisible(chromedp.CSS(`h1`))); err != nil {
		t.Fatal(err)
	}
	if resp, _ := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+secret)); resp.StatusCode != 401 {
		t.Errorf("after a sign-in with unmapped groups: status %d, want 401", resp.StatusCode)
	}

	// A provider that does not send the groups claim gets a clear answer.
	op.OmitGroups(true)
	op.SignInAs("alice")
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/logout"), chromedp.Click(chromedp.CSS(`main form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#tokens`)), chromedp.Navigate(s.url+"/t/acme/login"), chromedp.WaitVisible(chromedp.CSS(`h1`))); err != nil {
		t.Fatal(err)
	}
	if text := pageText(t, ctx); !strings.Contains(text, `did not send the groups claim "groups"`) {
		t.Errorf("missing groups claim page:\n%s", text)
	}
}

// githubSignInStack is a fake GitHub with one user, octocat (1001), a
// member of acme-org who can push to acme-org/api but not see
// acme-org/secret, and a stack whose tenant acme is bound to that
// installation with GitHub sign-in configured.
func githubSignInStack(t *testing.T) (*githubtest.Server, *stack) {
	t.Helper()
	gh := githubtest.New(t)
	gh.AddUser(githubtest.User{ID: 1001, Login: "octocat", Name: "The Octocat", Emails: []githubtest.Email{{Email: "octocat@acme.test", Primary: true, Verified: true}}})
	gh.AddOrg(2001, "acme-org")
	gh.AddInstallation(3001, 2001)
	gh.AddRepo(3001, githubtest.Repo{ID: 4001, Name: "api", Private: true})
	gh.AddRepo(3001, githubtest.Repo{ID: 4002, Name: "secret", Private: true})
	gh.SetPermission(1001, 4001, "push")
	gh.SetMembership(1001, 2001, "active", "member")
	s := newStack(t, "GITHUB_CLIENT_ID="+gh.ClientID, "GITHUB_CLIENT_SECRET="+gh.ClientSecret,
		"GITHUB_API_URL="+gh.APIURL, "GITHUB_WEB_URL="+gh.WebURL)
	gh.SetCallbackURL(s.url + "/auth/github/callback")
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled", "--github-installation", "3001")
	return gh, s
}

// TestBrowserGitHubSignIn signs in with the GitHub App user flow against a
// test server that serves GitHub's payload shapes under GITHUB_API_URL:
// the membership caches are refreshed from the installation, the token
// sees exactly the repositories the user can see on GitHub, and an expired
// cache answers 401 with the refresh hint until the next sign-in.
func TestBrowserGitHubSignIn(t *testing.T) {
	t.Parallel()
	gh, s := githubSignInStack(t)

	ctx := browser(t)
	gh.SignInAs(1001)
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/t/acme/login"), chromedp.WaitVisible(chromedp.CSS(`#name`)),
		chromedp.SendKeys(chromedp.CSS(`#name`), "github laptop"),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`#secret`))); err != nil {
		t.Fatalf("GitHub sign-in and token creation: %v\n%s", err, s.logs.String())
	}
	if text := pageText(t, ctx); !strings.Contains(text, "octocat@acme.test") || !strings.Contains(text, "24 hours") {
		t.Errorf("signed-in page:\n%s", text)
	}
	secret, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`#secret`)))
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, s.url+"/mcp", secret, "")
	text, isErr := call(t, cs, "list_repositories", nil)
	if isErr || !strings.Contains(text, "acme-org/api") || strings.Contains(text, "acme-org/secret") {
		t.Fatalf("GitHub user's token: isError=%v %s", isErr, text)
	}

	// Expired cache: 401 with the refresh hint; a new sign-in restores access.
	s.cltctl("membership", "expire", "--tenant", "acme", "--email", "octocat@acme.test")
	resp, _ := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+secret))
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "sign in to CodeLotse to refresh access") {
		t.Fatalf("expired membership: %d %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	gh.SignInAs(1001)
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/logout"), chromedp.Click(chromedp.CSS(`main form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#tokens`)), chromedp.Navigate(s.url+"/t/acme/login"), chromedp.WaitVisible(chromedp.CSS(`#list-h`))); err != nil {
		t.Fatal(err)
	}
	if resp, body := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+secret)); resp.StatusCode != 200 {
		t.Errorf("after signing in again: %d %s", resp.StatusCode, body)
	}
}
