//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres"
)

// TestGitHubPullRequestHead: the code index at a pull request's head.
// search_code with pull_request finds a line only on the pull request's
// branch and not on main (and not main's version of a file the pull
// request changes); after a synchronize webhook with a new head the new
// line is found and the old one not; get_file_contents with pull_request
// shows the head version; get_pull_request_review says which commit its
// line numbers refer to and whether the index holds it; closing the pull
// request drops its head index; a push to main re-indexes only the files
// it changes, and the whole repository once too many of its files lie out
// of path order.
func TestGitHubPullRequestHead(t *testing.T) {
	t.Parallel()
	gh, env := githubFixture(t)
	const head1 = "0123456789abcdef0123456789abcdef01234567" // the fixture's PR #7 head
	const head2 = "fedcba9876543210fedcba9876543210fedcba98"
	gh.SetRepoFiles(4001, head1, map[string]string{
		"cmd/main.go": "package main\n\nfunc BranchOnlyNeedle() {}\n",
		"cmd/new.go":  "package main\n\nfunc AddedOnBranch() {}\n",
		"README.md":   "# api\n",
	})
	gh.SetRepoFiles(4001, head2, map[string]string{
		"cmd/main.go": "package main\n\nfunc SecondHeadNeedle() {}\n",
		"README.md":   "# api\n",
	})
	// The test polls search_code while the worker indexes: no per-token
	// rate limit.
	s := newStack(t, append([]string{"MCP_RATE_PER_TOKEN=0", "MCP_RATE_PER_IP=0"}, env...)...)
	logs := &syncBuffer{}
	s.startWorker(logs, env...)
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled", "--github-installation", "3001")
	if out, errOut, code := s.cltctlRun("github", "sync", "--tenant", "acme", "--wait", "--timeout", "2m"); code != 0 {
		t.Fatalf("github sync: %s %s\n%s", out, errOut, logs.String())
	}
	s.cltctl("user", "add", "--tenant", "acme", "--email", "octocat@acme.test")
	s.cltctl("repo", "grant", "--tenant", "acme", "--email", "octocat@acme.test", "--full-name", "acme-org/api")
	cs := connect(t, s.url+"/mcp", s.token("acme", "octocat@acme.test", "t"), "")

	// try answers a search, or the in-band error of one: while the worker
	// is still indexing, "no index of its head" is an answer to wait past.
	try := func(query string, pr int) ([]map[string]any, string) {
		t.Helper()
		args := map[string]any{"query": query, "repository": "acme-org/api"}
		if pr != 0 {
			args["pull_request"] = pr
		}
		text, isErr := call(t, cs, "search_code", args)
		if isErr {
			return nil, text
		}
		var out []map[string]any
		for _, m := range unfence(t, text)["matches"].([]any) {
			out = append(out, m.(map[string]any))
		}
		return out, ""
	}
	search := func(query string, pr int) []map[string]any {
		t.Helper()
		out, errText := try(query, pr)
		if errText != "" {
			t.Fatalf("search_code %q (pull_request %d): %s", query, pr, errText)
		}
		return out
	}
	found := func(query string, pr int) int {
		t.Helper()
		out, _ := try(query, pr)
		return len(out)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(500 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60s\nworker:\n%s", what, logs.String())
			}
		}
	}
	// The base index is built first, then the head overlay against it.
	waitFor("the head of #7 indexed", func() bool { return found("BranchOnlyNeedle", 7) == 1 })
	if m := search("BranchOnlyNeedle", 7); m[0]["path"] != "cmd/main.go" || m[0]["commit"] != head1 {
		t.Errorf("match at the head = %v", m)
	}
	if m := search("BranchOnlyNeedle", 0); len(m) != 0 {
		t.Errorf("a line only on the branch found on main: %v", m)
	}
	if m := search("NeedleHandler", 7); len(m) != 0 {
		t.Errorf("main's version of a file the pull request changes found at its head: %v", m)
	}
	if m := search("NeedleHandler", 0); len(m) != 1 {
		t.Errorf("main's line not found on main: %v", m)
	}
	if m := search("AddedOnBranch", 7); len(m) != 1 || m[0]["path"] != "cmd/new.go" {
		t.Errorf("a file added on the branch: %v", m)
	}
	if m := search("# api", 7); len(m) != 1 || m[0]["path"] != "README.md" {
		t.Errorf("an unchanged file at the head (read through to main's index): %v", m)
	}
	text, isErr := call(t, cs, "get_file_contents", map[string]any{"repository": "acme-org/api", "path": "cmd/main.go", "pull_request": 7})
	if doc := unfence(t, text); isErr || doc["commit"] != head1 || !strings.Contains(text, "3: func BranchOnlyNeedle() {}") {
		t.Errorf("get_file_contents at the head:\n%s", text)
	}
	text, _ = call(t, cs, "get_file_contents", map[string]any{"repository": "acme-org/api", "path": "cmd/main.go"})
	if !strings.Contains(text, "NeedleHandler") {
		t.Errorf("get_file_contents on main:\n%s", text)
	}
	text, _ = call(t, cs, "get_pull_request_review", map[string]any{"repository": "acme-org/api", "number": 7})
	lines, _ := unfence(t, text)["line_numbers"].(map[string]any)
	if lines == nil || lines["indexed_head"] != head1 || lines["index"].(map[string]any)[head1] != "pull_request_head" {
		t.Errorf("get_pull_request_review line_numbers = %v", lines)
	}
	if text, isErr := call(t, cs, "search_code", map[string]any{"query": "x := 1", "pull_request": 7}); !isErr || !strings.Contains(text, "needs repository") {
		t.Errorf("pull_request without repository: %v %s", isErr, text)
	}
	if text, isErr := call(t, cs, "search_code", map[string]any{"query": "NeedleHandler", "repository": "acme-org/api", "pull_request": 99}); !isErr || !strings.Contains(text, "no index of its head") {
		t.Errorf("an unknown pull request: %v %s", isErr, text)
	}

	// A push to the branch: pull_request synchronize with the new head.
	gh.PushPullRequest(4001, 7, head2)
	payload := map[string]any{"action": "synchronize", "installation": map[string]any{"id": 3001},
		"repository":   map[string]any{"id": 4001, "full_name": "acme-org/api", "default_branch": "main"},
		"pull_request": map[string]any{"number": 7, "head": map[string]any{"sha": head2}}}
	if code, status := deliver(t, s, webhookSecret, "pull_request", "sync-1", payload); code != 202 || status != "queued" {
		t.Fatalf("synchronize: %d %q", code, status)
	}
	waitFor("the new head of #7 indexed", func() bool { return found("SecondHeadNeedle", 7) == 1 })
	if m := search("BranchOnlyNeedle", 7); len(m) != 0 {
		t.Errorf("the old head's line after synchronize: %v", m)
	}
	if m := search("AddedOnBranch", 7); len(m) != 0 {
		t.Errorf("a file the new head no longer adds: %v", m)
	}

	// Closed: its head index is dropped.
	gh.ClosePullRequest(4001, 7, true)
	payload["action"] = "closed"
	if code, _ := deliver(t, s, webhookSecret, "pull_request", "close-1", payload); code != 202 {
		t.Fatalf("closed: %d", code)
	}
	waitFor("the head index of the closed #7 dropped", func() bool {
		text, isErr := call(t, cs, "search_code", map[string]any{"query": "SecondHeadNeedle", "repository": "acme-org/api", "pull_request": 7})
		return isErr && strings.Contains(text, "no index of its head")
	})

	// A push to main re-indexes only the files it changes: the unchanged
	// README keeps its row, and no archive is downloaded again.
	const main2 = "c0ffee1111111111111111111111111111111111"
	gh.SetRepoFiles(4001, main2, map[string]string{"cmd/main.go": "package main\n\nfunc PushedNeedle() {}\n", "README.md": "# api\n"})
	gh.SetBranchHead(4001, "main", main2)
	readmeID := func() (id int64, commit string) {
		if err := s.db.Admin.Pool.QueryRow(context.Background(), `SELECT id, commit_sha FROM code_files WHERE path = 'README.md'`).Scan(&id, &commit); err != nil {
			t.Fatal(err)
		}
		return id, commit
	}
	before, _ := readmeID()
	tarballs := func() int {
		n := 0
		for _, r := range gh.Requests() {
			if strings.Contains(r, "/tarball") {
				n++
			}
		}
		return n
	}
	archives := tarballs()
	if code, status := deliver(t, s, webhookSecret, "push", "push-1", map[string]any{"ref": "refs/heads/main", "installation": map[string]any{"id": 3001},
		"repository": map[string]any{"id": 4001, "full_name": "acme-org/api", "default_branch": "main"}}); code != 202 || status != "queued" {
		t.Fatalf("push: %d %q", code, status)
	}
	waitFor("the pushed line indexed on main", func() bool { return found("PushedNeedle", 0) == 1 })
	if m := search("NeedleHandler", 0); len(m) != 0 {
		t.Errorf("the replaced line is still found on main: %v", m)
	}
	if after, commit := readmeID(); after != before || commit != main2 {
		t.Errorf("unchanged README: row %d→%d, commit %s; want the same row at the new commit", before, after, commit)
	}
	if n := tarballs(); n != archives {
		t.Errorf("a push of one file downloaded the archive again (%d → %d)", archives, n)
	}

	// With too many files out of path order (new files and files that
	// grew go to the end of the id order), the next push indexes the
	// repository whole from the archive, in path order again, and the
	// count starts from zero (migration 0071).
	s.exec(`UPDATE repositories SET code_files_moved = $1 WHERE full_name = 'acme-org/api'`, postgres.MaxFilesMoved)
	const main3 = "c0ffee2222222222222222222222222222222222"
	gh.SetRepoFiles(4001, main3, map[string]string{"cmd/main.go": "package main\n\nfunc PushedNeedle() {}\n", "README.md": "# api\n",
		"docs/added.md": "ScatteredNeedle\n"})
	gh.SetBranchHead(4001, "main", main3)
	archives = tarballs()
	if code, status := deliver(t, s, webhookSecret, "push", "push-scattered", map[string]any{"ref": "refs/heads/main", "after": main3, "installation": map[string]any{"id": 3001},
		"repository": map[string]any{"id": 4001, "full_name": "acme-org/api", "default_branch": "main"}}); code != 202 || status != "queued" {
		t.Fatalf("push: %d %q", code, status)
	}
	waitFor("the added file indexed on main", func() bool { return found("ScatteredNeedle", 0) == 1 })
	if n := tarballs(); n != archives+1 {
		t.Errorf("a push to a scattered index downloaded %d archives, want 1", n-archives)
	}
	var moved int
	if err := s.db.Admin.Pool.QueryRow(context.Background(), `SELECT code_files_moved FROM repositories WHERE full_name = 'acme-org/api'`).Scan(&moved); err != nil {
		t.Fatal(err)
	}
	if moved != 0 {
		t.Errorf("code_files_moved after the whole indexing = %d, want 0", moved)
	}
}
