//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

// refreshEvery is the worker's membership refresh interval in these tests.
const refreshEvery = 2 * time.Second

// adminPage signs in with a break-glass link (raw HTTP, a cookie jar) and
// returns the tenant's admin page.
func adminPage(t *testing.T, s *stack, slug string) string {
	t.Helper()
	// break-glass needs an existing user; adding one again changes nothing.
	if out, errOut, code := s.cltctlRun("user", "add", "--tenant", slug, "--email", "ops@codelotse.test", "--role", "admin"); code != 0 {
		t.Fatalf("user add: %s %s", out, errOut)
	}
	link, err := url.Parse(strings.TrimSpace(s.cltctl("break-glass", "--tenant", slug, "--email", "ops@codelotse.test")))
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/auth/link", strings.NewReader(url.Values{"v": {link.Query().Get("v")}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.url)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(s.url + "/t/" + slug + "/admin")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("admin page: %d\n%s", resp.StatusCode, b)
	}
	return string(b)
}

// TestGitHubMembershipRefresh: GitHub users whose sign-in is 25 hours old
// keep working tokens while the worker refreshes their memberships from
// the installation; a user removed from the organisation on GitHub gets
// 401 within a refresh cycle, and at once when the organization
// member_removed webhook arrives (with no worker running at all); without
// a worker the 24-hour bound still applies; an installation without the
// Members permission falls back to sign-in refresh and says so.
func TestGitHubMembershipRefresh(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	gh.AddOrg(2001, "acme-org")
	gh.AddInstallation(3001, 2001)
	gh.AddRepo(3001, githubtest.Repo{ID: 4001, Name: "api", Private: true})
	gh.AddRepo(3001, githubtest.Repo{ID: 4002, Name: "web"})
	gh.AddUser(githubtest.User{ID: 1001, Login: "octocat"})
	gh.AddUser(githubtest.User{ID: 1002, Login: "hubot"})
	gh.AddUser(githubtest.User{ID: 1003, Login: "monalisa"})
	gh.SetMembership(1001, 2001, "active", "member")
	gh.SetMembership(1002, 2001, "active", "member")
	gh.SetMembership(1003, 2001, "active", "member")
	gh.SetTeam(2001, "backend", []int64{1001}, map[int64]string{4001: "pull"})
	gh.SetPermission(1002, 4002, "push")
	gh.SetPermission(1003, 4002, "pull")
	gh.SetMaxPerPage(1) // every listing pages
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, gh.AppPrivateKeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"GITHUB_APP_ID=" + fmt.Sprint(gh.AppID), "GITHUB_APP_PRIVATE_KEY_FILE=" + keyFile,
		"GITHUB_API_URL=" + gh.APIURL, "GITHUB_WEB_URL=" + gh.WebURL, "GITHUB_WEBHOOK_SECRET=" + webhookSecret}
	workerEnv := append([]string{"GITHUB_MEMBERSHIP_REFRESH_INTERVAL=" + refreshEvery.String()}, env...)
	// The test polls tokens while the worker refreshes: no rate limits.
	s := newStack(t, append([]string{"MCP_RATE_PER_TOKEN=0", "MCP_RATE_PER_IP=0"}, env...)...)
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled", "--github-installation", "3001")
	s.cltctl("repo", "add", "--tenant", "acme", "--full-name", "acme-org/api")

	// Three users who signed in with GitHub yesterday: their caches are
	// 25 hours old.
	toks := map[string]string{}
	for id, login := range map[int64]string{1001: "octocat", 1002: "hubot", 1003: "monalisa"} {
		email := login + "@acme.test"
		s.cltctl("user", "add", "--tenant", "acme", "--email", email)
		s.exec(`UPDATE users SET github_user_id = $1, github_login = $2 WHERE email = $3`, id, login, email)
		// As a GitHub sign-in leaves it: a cache from GitHub, which ages
		// (cltctl's local memberships do not).
		s.exec(`UPDATE tenant_memberships SET source = 'github' WHERE user_id = (SELECT id FROM users WHERE email = $1)`, email)
		s.cltctl("repo", "grant", "--tenant", "acme", "--email", email, "--full-name", "acme-org/api")
		toks[login] = s.token("acme", email, "agent")
	}
	age := func() {
		s.exec(`UPDATE tenant_memberships SET refreshed_at = now() - interval '25 hours'`)
		s.exec(`UPDATE repo_memberships SET refreshed_at = now() - interval '25 hours'`)
	}
	age()
	status := func(login string) (int, string) {
		resp, body := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+toks[login]))
		return resp.StatusCode, body
	}
	// Without a refresh the 24-hour bound applies: this is the daily
	// sign-in the refresh removes.
	if code, _ := status("octocat"); code != 401 {
		t.Fatalf("aged cache without a worker: %d, want 401", code)
	}

	logs := &syncBuffer{}
	stop := stoppableWorker(s, logs, workerEnv...)
	waitFor := func(what string, d time.Duration, ok func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !ok() {
			if time.Since(start) > d {
				t.Fatalf("%s: not within %s\nworker:\n%s", what, d, logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		return time.Since(start)
	}
	took := waitFor("aged tokens working again", 30*time.Second, func() bool {
		a, _ := status("octocat")
		b, _ := status("hubot")
		return a == 200 && b == 200
	})
	t.Logf("aged caches refreshed %s after the worker started (interval %s)", took.Round(time.Millisecond), refreshEvery)
	// They keep working across several refresh cycles, with the
	// repositories GitHub gives them: octocat reads api through a team,
	// hubot reads web only (the hand-made grant on api is replaced).
	for deadline := time.Now().Add(3 * refreshEvery); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		for _, login := range []string{"octocat", "hubot", "monalisa"} {
			if code, _ := status(login); code != 200 {
				t.Fatalf("%s's token during refreshes: %d, want 200", login, code)
			}
		}
	}
	if _, body := status("octocat"); !strings.Contains(body, "acme-org/api") || strings.Contains(body, "acme-org/web") {
		t.Errorf("octocat's repositories: %s", body)
	}
	if _, body := status("hubot"); strings.Contains(body, "acme-org/api") || !strings.Contains(body, "acme-org/web") {
		t.Errorf("hubot's repositories: %s", body)
	}
	var state string
	var members int
	if err := s.db.Admin.Pool.QueryRow(context.Background(), `SELECT state, members FROM github_membership_refreshes`).Scan(&state, &members); err != nil || state != "ok" || members != 3 {
		t.Errorf("refresh status: %q, %d members (%v)", state, members, err)
	}

	if page := adminPage(t, s, "acme"); !strings.Contains(page, "refreshed from the GitHub App installation: last at") || !strings.Contains(page, "3 members, 2 repositories") {
		t.Errorf("admin page after refreshes does not show their freshness:\n%s", page)
	}

	// Removed from the organisation on GitHub: 401 within a refresh cycle.
	gh.SetMembership(1001, 2001, "", "")
	took = waitFor("octocat's token refused after removal on GitHub", 30*time.Second, func() bool {
		code, _ := status("octocat")
		return code == 401
	})
	t.Logf("removal on GitHub took effect after %s (interval %s)", took.Round(time.Millisecond), refreshEvery)
	resp, _ := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+toks["octocat"]))
	if !strings.Contains(resp.Header.Get("WWW-Authenticate"), "sign in to CodeLotse to refresh access") {
		t.Errorf("removed member: WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
	}
	if code, _ := status("hubot"); code != 200 {
		t.Errorf("another member's token after octocat's removal: %d", code)
	}

	// The member_removed webhook takes effect at once: no worker runs.
	stop()
	gh.SetMembership(1002, 2001, "", "")
	gh.SetPermission(1002, 4002, "")
	code, st := deliver(t, s, webhookSecret, "organization", "m-1", map[string]any{"action": "member_removed",
		"installation": map[string]any{"id": 3001}, "organization": map[string]any{"id": 2001, "login": "acme-org"},
		"membership": map[string]any{"user": map[string]any{"id": 1002, "login": "hubot"}, "role": "member", "state": "active"}})
	if code != 202 || st != "memberships expired" {
		t.Fatalf("member_removed: %d %q", code, st)
	}
	if code, _ := status("hubot"); code != 401 {
		t.Errorf("hubot right after member_removed: %d, want 401", code)
	}
	if code, _ := status("monalisa"); code != 200 {
		t.Errorf("monalisa after hubot's removal: %d, want 200", code)
	}
	var queued int
	if err := s.db.Admin.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = 'github.refresh_memberships' AND state IN ('available', 'scheduled', 'pending')`).Scan(&queued); err != nil || queued != 1 {
		t.Errorf("refresh jobs queued by the webhook: %d (%v), want 1", queued, err)
	}

	// With the worker stopped, the 24-hour bound is the safety net.
	age()
	if code, _ := status("monalisa"); code != 401 {
		t.Errorf("aged cache with the worker stopped: %d, want 401", code)
	}

	// An installation without the Members permission: the refresh records
	// it, leaves the caches alone (sign-in refresh only), and the refresh
	// the webhook queued does not restore hubot.
	gh.RevokeInstallationPermission(3001, "members")
	s.exec(`UPDATE tenant_memberships m SET refreshed_at = now() FROM users u WHERE u.id = m.user_id AND u.github_login = 'monalisa'`)
	_ = stoppableWorker(s, logs, workerEnv...)
	waitFor("the refresh to record the missing permission", 30*time.Second, func() bool {
		var st string
		_ = s.db.Admin.Pool.QueryRow(context.Background(), `SELECT state FROM github_membership_refreshes`).Scan(&st)
		return st == "missing_permission"
	})
	if code, _ := status("monalisa"); code != 200 {
		t.Errorf("a fresh sign-in cache while the installation lacks a permission: %d, want 200", code)
	}
	if code, _ := status("hubot"); code != 401 {
		t.Errorf("hubot after the fallback: %d, want 401", code)
	}
	if page := adminPage(t, s, "acme"); !strings.Contains(page, "Access is refreshed at sign-in only.") || !strings.Contains(page, "Members: read") {
		t.Errorf("admin page without the Members permission does not say so:\n%s", page)
	}
}
