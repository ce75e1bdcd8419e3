//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

const webhookSecret = "e2e-webhook-secret-0123456789"

// githubFixture is a fake GitHub with one organisation installation, a
// repository with a reviewed pull request, code-scanning alerts and code.
func githubFixture(t *testing.T) (*githubtest.Server, []string) {
	t.Helper()
	gh := githubtest.New(t)
	gh.AddOrg(2001, "acme-org")
	gh.AddInstallation(3001, 2001)
	gh.AddRepo(3001, githubtest.Repo{ID: 4001, Name: "api", Private: true})
	gh.AddRepo(3001, githubtest.Repo{ID: 4002, Name: "web"})
	now := time.Now().UTC()
	gh.AddPullRequest(4001, githubtest.PullRequest{Number: 7, Title: "Add the store", Author: "octocat", Head: "feature/store", HeadSHA: "0123456789abcdef0123456789abcdef01234567", CreatedAt: now, UpdatedAt: now})
	gh.AddReview(4001, 7, githubtest.Review{ID: 501, Author: "coderabbitai[bot]", AuthorType: "Bot", State: "CHANGES_REQUESTED", Body: "Two problems in the store.", SubmittedAt: now})
	gh.AddReviewComment(4001, 7, githubtest.ReviewComment{ID: 601, ReviewID: 501, Author: "coderabbitai[bot]", AuthorType: "Bot", Path: "cmd/main.go", Line: 3, Body: "Possible nil dereference here.\nCheck the store before use.", CreatedAt: now})
	// A reply is a review of its own on GitHub (COMMENTED, no body): not a
	// review to a reader, so not the pull request's latest.
	gh.AddReview(4001, 7, githubtest.Review{ID: 502, Author: "octocat", State: "COMMENTED", SubmittedAt: now.Add(time.Second)})
	gh.AddReviewComment(4001, 7, githubtest.ReviewComment{ID: 602, ReviewID: 502, InReplyTo: 601, Author: "octocat", Path: "cmd/main.go", Line: 3, Body: "Fixed in the next commit.", CreatedAt: now.Add(time.Second)})
	gh.AddReviewComment(4001, 7, githubtest.ReviewComment{ID: 603, ReviewID: 501, Author: "coderabbitai[bot]", AuthorType: "Bot", Path: "cmd/old.go", OriginalLine: 9, Body: "Outdated remark about old code.", CreatedAt: now})
	// The outdated remark's thread was also resolved on GitHub (GraphQL
	// isResolved), so it is resolved at its original line.
	gh.ResolveThread(4001, 7, 603, true)
	gh.AddCodeScanningAlert(4001, githubtest.CodeScanningAlert{Number: 1, RuleID: "go/sql-injection", RuleName: "SQL injection", RuleDescription: "Database query built from user-controlled sources",
		RuleSeverity: "error", SecuritySeverityLevel: "high", Path: "cmd/main.go", StartLine: 3, EndLine: 3, Message: "This query depends on a user-provided value.", CommitSHA: "c0ffee0000000000000000000000000000000000", CreatedAt: now, UpdatedAt: now})
	const commit = "c0ffee0000000000000000000000000000000000"
	gh.SetRepoFiles(4001, commit, map[string]string{"cmd/main.go": "package main\n\nfunc NeedleHandler() {}\n", "README.md": "# api\n"})
	gh.SetBranchHead(4001, "main", commit)
	gh.SetRepoFiles(4002, "beef000000000000000000000000000000000000", map[string]string{"index.html": "<h1>web</h1>\n"})
	gh.SetBranchHead(4002, "main", "beef000000000000000000000000000000000000")

	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, gh.AppPrivateKeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"GITHUB_APP_ID=" + fmt.Sprint(gh.AppID), "GITHUB_APP_PRIVATE_KEY_FILE=" + keyFile,
		"GITHUB_API_URL=" + gh.APIURL, "GITHUB_WEB_URL=" + gh.WebURL, "GITHUB_WEBHOOK_SECRET=" + webhookSecret}
	return gh, env
}

func jobCount(t *testing.T, s *stack) int {
	t.Helper()
	var n int
	if err := s.db.Admin.Pool.QueryRow(context.Background(), "SELECT count(*) FROM river_job").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// deliver sends a webhook delivery signed with secret.
func deliver(t *testing.T, s *stack, secret, event, delivery string, payload any) (int, string) {
	t.Helper()
	body, _ := json.Marshal(payload)
	req, _ := http.NewRequest(http.MethodPost, s.url+"/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out["status"]
}

// TestGitHubSync runs the worker against the GitHub test server: after a
// sync the MCP tools return the pull request's review with its findings,
// the code-scanning findings and search_code hits from the archive; then
// webhooks: a bad signature is refused, a redelivery enqueues one job, and
// a member_removed event sends that user's tokens to 401.
func TestGitHubSync(t *testing.T) {
	t.Parallel()
	gh, env := githubFixture(t)
	s := newStack(t, env...)
	workerLogs := &syncBuffer{}
	s.startWorker(workerLogs, env...)
	s.startWorker(&syncBuffer{}, env...) // a second worker on the same database
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled", "--github-installation", "3001")
	// Every listing pages (one item per page, Link headers), and GitHub
	// answers a secondary rate limit and a 429 on the way: the sync waits
	// them out and completes.
	gh.SetMaxPerPage(1)
	gh.SetRetryAfter(time.Second)
	gh.FailNextOn("/installation/repositories", githubtest.SecondaryRateLimit)
	gh.FailNextOn("/repos/acme-org/api/pulls", githubtest.TooManyRequests)
	if out, errOut, code := s.cltctlRun("github", "sync", "--tenant", "acme", "--wait", "--timeout", "2m"); code != 0 {
		t.Fatalf("github sync: %s %s\nworker:\n%s", out, errOut, workerLogs.String())
	}
	s.cltctl("user", "add", "--tenant", "acme", "--email", "octocat@acme.test")
	s.exec(`UPDATE users SET github_user_id = 1001 WHERE email = 'octocat@acme.test'`)
	s.cltctl("repo", "grant", "--tenant", "acme", "--email", "octocat@acme.test", "--full-name", "acme-org/api")
	tok := s.token("acme", "octocat@acme.test", "t")
	cs := connect(t, s.url+"/mcp", tok, "")

	text, isErr := call(t, cs, "list_repositories", nil)
	if isErr || !strings.Contains(text, "acme-org/api") || !strings.Contains(text, "c0ffee0000000000000000000000000000000000") {
		t.Fatalf("list_repositories after sync: %s", text)
	}
	text, isErr = call(t, cs, "get_pull_request_review", map[string]any{"repository": "acme-org/api", "number": 7})
	if isErr {
		t.Fatal(text)
	}
	doc := unfence(t, text)
	rev := doc["review"].(map[string]any)
	if rev["author"] != "coderabbitai[bot]" || rev["status"] != "changes_requested" || rev["summary"] != "Two problems in the store." {
		t.Errorf("review = %v", rev)
	}
	findings := doc["findings"].([]any)
	if len(findings) != 2 {
		t.Fatalf("findings = %v (the reply must not be a finding)", findings)
	}
	byPath := map[string]map[string]any{}
	for _, f := range findings {
		m := f.(map[string]any)
		byPath[m["path"].(string)] = m
	}
	if f := byPath["cmd/main.go"]; f == nil || f["start_line"].(float64) != 3 || f["title"] != "Possible nil dereference here." || f["status"] != "open" {
		t.Errorf("inline comment finding = %v", f)
	}
	if f := byPath["cmd/old.go"]; f == nil || f["status"] != "resolved" || f["start_line"].(float64) != 9 {
		t.Errorf("outdated comment finding = %v", f)
	}
	text, _ = call(t, cs, "search_findings", map[string]any{"repository": "acme-org/api", "rule": "CodeQL/go/sql-injection"})
	if fs := unfence(t, text)["findings"].([]any); len(fs) != 1 || fs[0].(map[string]any)["severity"] != "high" {
		t.Errorf("code-scanning findings = %v", fs)
	}
	text, _ = call(t, cs, "search_code", map[string]any{"query": "NeedleHandler"})
	if m := unfence(t, text)["matches"].([]any); len(m) != 1 || m[0].(map[string]any)["path"] != "cmd/main.go" {
		t.Errorf("search_code after indexing the archive = %v", m)
	}

	// Webhooks.
	payload := map[string]any{"action": "opened", "installation": map[string]any{"id": 3001},
		"repository":   map[string]any{"id": 4001, "full_name": "acme-org/api", "default_branch": "main"},
		"pull_request": map[string]any{"number": 8}}
	before := jobCount(t, s)
	if code, _ := deliver(t, s, "wrong-secret", "pull_request", "d-1", payload); code != 401 {
		t.Errorf("bad signature: %d, want 401", code)
	}
	if n := jobCount(t, s); n != before {
		t.Errorf("a bad signature enqueued %d jobs", n-before)
	}
	if code, status := deliver(t, s, webhookSecret, "pull_request", "d-2", payload); code != 202 || status != "queued" {
		t.Errorf("delivery: %d %q", code, status)
	}
	if code, status := deliver(t, s, webhookSecret, "pull_request", "d-2", payload); code != 202 || status != "duplicate delivery" {
		t.Errorf("redelivery: %d %q", code, status)
	}
	var deliveries int
	if err := s.db.Admin.Pool.QueryRow(context.Background(), "SELECT count(*) FROM github_deliveries WHERE delivery_id = 'd-2'").Scan(&deliveries); err != nil || deliveries != 1 {
		t.Errorf("delivery d-2 recorded %d times (%v)", deliveries, err)
	}
	if n := jobCount(t, s); n > before+1 {
		t.Errorf("a redelivery enqueued another job: %d new jobs", n-before)
	}

	// The event header is not signed: a signed body replayed under another
	// event name (here "team", which would expire everyone) is refused.
	if code, _ := deliver(t, s, webhookSecret, "team", "d-x", payload); code != 400 {
		t.Errorf("signed pull_request body sent as a team event: %d, want 400", code)
	}
	if resp, _ := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+tok)); resp.StatusCode != 200 {
		t.Errorf("a refused relabelled delivery expired memberships: %d", resp.StatusCode)
	}

	code, status := deliver(t, s, webhookSecret, "organization", "d-3", map[string]any{"action": "member_removed",
		"installation": map[string]any{"id": 3001}, "organization": map[string]any{"id": 2001, "login": "acme-org"},
		"membership": map[string]any{"user": map[string]any{"id": 1001, "login": "octocat"}, "role": "member", "state": "active"}})
	if code != 202 || status != "memberships expired" {
		t.Fatalf("member_removed: %d %q", code, status)
	}
	resp, _ := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+tok))
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "sign in to CodeLotse to refresh access") {
		t.Errorf("after member_removed: %d %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// Two repositories at one per page, one of the pages asked twice
	// because of the secondary limit; the pull requests likewise.
	var repoPages, pullPages, secondPages int
	for _, r := range gh.Requests() {
		switch {
		case strings.Contains(r, "/installation/repositories"):
			repoPages++
		case strings.Contains(r, "/repos/acme-org/api/pulls?"):
			pullPages++
		}
		if strings.Contains(r, "page=2") {
			secondPages++
		}
	}
	if repoPages < 3 || pullPages < 2 || secondPages == 0 {
		t.Errorf("requests: %d repository listings (want ≥ 3: two pages and a retry), %d pull listings, %d second pages", repoPages, pullPages, secondPages)
	}
}
