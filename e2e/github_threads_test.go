//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

// TestGitHubReviewThreads: review threads are read as GitHub shows them
// (GraphQL): a thread resolved on GitHub is resolved in search_findings
// and absent from get_fix_prompt's default findings, a ```suggestion block
// comes back in suggestion, titles are short; a second sync of unchanged
// pull requests is answered mostly by 304 Not Modified, and an unchanged
// merged pull request is not read again.
func TestGitHubReviewThreads(t *testing.T) {
	t.Parallel()
	gh, env := githubFixture(t)
	now := time.Now().UTC()
	gh.AddReviewComment(4001, 7, githubtest.ReviewComment{ID: 604, ReviewID: 501, Author: "coderabbitai[bot]", AuthorType: "Bot", Path: "cmd/main.go", Line: 5, StartLine: 4,
		Body: "<!-- review-bot: 7f3a -->\n**Return the error instead of panicking**\n\nPanicking here takes the whole server down.\n\n```suggestion\n\tif err != nil {\n\t\treturn err\n\t}\n```\n", CreatedAt: now})
	gh.ResolveThread(4001, 7, 601, true)
	gh.AddPullRequest(4001, githubtest.PullRequest{Number: 9, Title: "Old change", Author: "octocat", State: "closed", Merged: true, CreatedAt: now, UpdatedAt: now})
	gh.AddReview(4001, 9, githubtest.Review{ID: 509, Author: "octocat", State: "APPROVED", Body: "Looks good.", SubmittedAt: now})
	s := newStack(t, env...)
	s.startWorker(&syncBuffer{}, env...)
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled", "--github-installation", "3001")
	if out, errOut, code := s.cltctlRun("github", "sync", "--tenant", "acme", "--wait", "--timeout", "2m"); code != 0 {
		t.Fatalf("github sync: %s %s", out, errOut)
	}
	s.cltctl("user", "add", "--tenant", "acme", "--email", "octocat@acme.test")
	s.cltctl("repo", "grant", "--tenant", "acme", "--email", "octocat@acme.test", "--full-name", "acme-org/api")
	cs := connect(t, s.url+"/mcp", s.token("acme", "octocat@acme.test", "t"), "")

	text, isErr := call(t, cs, "search_findings", map[string]any{"repository": "acme-org/api", "pull_request": 7, "status": "all"})
	if isErr {
		t.Fatal(text)
	}
	byTitle := map[string]map[string]any{}
	for _, f := range unfence(t, text)["findings"].([]any) {
		m := f.(map[string]any)
		byTitle[m["title"].(string)] = m
	}
	if f := byTitle["Possible nil dereference here."]; f == nil || f["status"] != "resolved" {
		t.Errorf("thread resolved on GitHub: %v (findings %v)", f, byTitle)
	}
	f := byTitle["Return the error instead of panicking"]
	if f == nil || f["status"] != "open" || f["suggestion"] != "\tif err != nil {\n\t\treturn err\n\t}" {
		t.Errorf("finding with a suggestion block: %v (findings %v)", f, byTitle)
	}
	text, _ = call(t, cs, "search_findings", map[string]any{"repository": "acme-org/api", "pull_request": 7})
	if strings.Contains(text, "Possible nil dereference") || !strings.Contains(text, "Return the error instead of panicking") {
		t.Errorf("open findings include a resolved thread or miss an open one:\n%s", text)
	}
	text, isErr = call(t, cs, "get_fix_prompt", map[string]any{"repository": "acme-org/api", "number": 7})
	if isErr {
		t.Fatal(text)
	}
	if strings.Contains(text, "Possible nil dereference") || !strings.Contains(text, "Return the error instead of panicking") || !strings.Contains(text, "return err") {
		t.Errorf("get_fix_prompt's default findings:\n%s", text)
	}

	// A second sync of the same, unchanged data: the listings are
	// conditional requests, answered 304 (which GitHub does not count).
	before := gh.NotModified()
	if out, errOut, code := s.cltctlRun("github", "sync", "--tenant", "acme", "--wait", "--timeout", "2m"); code != 0 {
		t.Fatalf("second github sync: %s %s", out, errOut)
	}
	if n := gh.NotModified() - before; n < 4 {
		t.Errorf("304 answers in an unchanged second sync = %d, want the repository, pull-request, review and comment listings", n)
	}
	// The merged pull request has not changed since its last sync: its
	// reviews are not read again.
	reviews9 := 0
	for _, r := range gh.Requests() {
		if strings.Contains(r, "/repos/acme-org/api/pulls/9/reviews") {
			reviews9++
		}
	}
	if reviews9 != 1 {
		t.Errorf("reviews of an unchanged merged pull request read %d times in two syncs, want 1", reviews9)
	}
	// A thread reopened on GitHub is open again after the next sync.
	gh.ResolveThread(4001, 7, 601, false)
	if out, errOut, code := s.cltctlRun("github", "sync", "--tenant", "acme", "--wait", "--timeout", "2m"); code != 0 {
		t.Fatalf("third github sync: %s %s", out, errOut)
	}
	text, _ = call(t, cs, "search_findings", map[string]any{"repository": "acme-org/api", "pull_request": 7})
	if !strings.Contains(text, "Possible nil dereference") {
		t.Errorf("a thread unresolved on GitHub is not open again:\n%s", text)
	}
}
