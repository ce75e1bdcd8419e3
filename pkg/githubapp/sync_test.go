package githubapp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// countWith counts the served requests that start with prefix and contain
// every one of parts (query parameters, whose order varies by page).
func countWith(s *githubtest.Server, prefix string, parts ...string) int {
	n := 0
	for _, r := range s.Requests() {
		ok := strings.HasPrefix(r, prefix)
		for _, p := range parts {
			ok = ok && strings.Contains(r, p)
		}
		if ok {
			n++
		}
	}
	return n
}

func TestRepositories(t *testing.T) {
	s, a, _ := appFixture(t)
	s.AddRepo(instID, githubtest.Repo{ID: 1002, Name: "docs"})
	s.SetMaxPerPage(1)
	repos, err := a.Installation(instID).Repositories(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []Repo{
		{ID: apiRepo, FullName: "acme/api", DefaultBranch: "main", URL: s.WebURL + "acme/api", Private: true},
		{ID: webRepo, FullName: "acme/web", DefaultBranch: "trunk", URL: s.WebURL + "acme/web", Archived: true},
		{ID: 1002, FullName: "acme/docs", DefaultBranch: "main", URL: s.WebURL + "acme/docs"},
	}
	if !slices.Equal(repos, want) {
		t.Errorf("repos = %+v\nwant %+v", repos, want)
	}
	if n := count(s, "GET /api/v3/installation/repositories"); n != 3 {
		t.Errorf("%d pages fetched, want 3", n)
	}
}

// TestAPIAtServerRoot: api.github.com serves the API at the root; so may a
// test server.
func TestAPIAtServerRoot(t *testing.T) {
	s := appServer(t)
	a, _ := newApp(t, s, s.URL, nil)
	if id, _, err := a.Installation(instID).Account(context.Background()); err != nil || id != acmeID {
		t.Fatalf("Account: %d, %v", id, err)
	}
	if repos, err := a.Installation(instID).Repositories(context.Background()); err != nil || len(repos) != 2 {
		t.Fatalf("Repositories: %d, %v", len(repos), err)
	}
	if n := count(s, "GET /installation/repositories"); n != 1 {
		t.Errorf("requests = %v", s.Requests())
	}
}

func TestPullRequests(t *testing.T) {
	s, a, _ := appFixture(t)
	now := time.Now().UTC().Truncate(time.Second)
	day := 24 * time.Hour
	cut := now.Add(-30 * day)
	add := func(pr githubtest.PullRequest) { s.AddPullRequest(apiRepo, pr) }
	add(githubtest.PullRequest{Number: 1, Title: "stale but open", Author: "alice", CreatedAt: now.Add(-400 * day)})
	add(githubtest.PullRequest{Number: 2, Title: "fresh", Author: "bob", Base: "main", Head: "feat/x", HeadSHA: strings.Repeat("a", 40), CreatedAt: now.Add(-5 * day), UpdatedAt: now.Add(-time.Hour)})
	add(githubtest.PullRequest{Number: 3, Title: "closed lately", Author: "carol", State: "closed", CreatedAt: now.Add(-10 * day), UpdatedAt: now.Add(-2 * day)})
	add(githubtest.PullRequest{Number: 4, Title: "merged lately", Author: "dave", State: "closed", Merged: true, CreatedAt: now.Add(-10 * day), UpdatedAt: now.Add(-3 * day)})
	add(githubtest.PullRequest{Number: 5, Title: "closed long ago", Author: "erin", State: "closed", CreatedAt: now.Add(-90 * day), UpdatedAt: now.Add(-60 * day)})
	add(githubtest.PullRequest{Number: 6, Title: "closed longer ago", Author: "frank", State: "closed", Merged: true, CreatedAt: now.Add(-99 * day), UpdatedAt: now.Add(-90 * day)})
	add(githubtest.PullRequest{Number: 7, Title: "bump deps", Author: "dependabot[bot]", AuthorType: "Bot", CreatedAt: now.Add(-day)})
	add(githubtest.PullRequest{Number: 8, Title: "by a deleted account", CreatedAt: now.Add(-2 * day)})
	add(githubtest.PullRequest{Number: 9, Title: "closed exactly at the cut", Author: "gina", State: "closed", CreatedAt: cut.Add(-day), UpdatedAt: cut})
	add(githubtest.PullRequest{Number: 10, Title: "closed a second before", Author: "hal", State: "closed", CreatedAt: cut.Add(-day), UpdatedAt: cut.Add(-time.Second)})
	s.SetMaxPerPage(1)

	prs, err := a.Installation(instID).PullRequests(context.Background(), "acme/api", cut)
	if err != nil {
		t.Fatal(err)
	}
	var numbers []int
	byNumber := map[int]PullRequest{}
	for _, pr := range prs {
		numbers = append(numbers, pr.Number)
		byNumber[pr.Number] = pr
	}
	if want := []int{1, 2, 3, 4, 7, 8, 9}; !slices.Equal(numbers, want) {
		t.Fatalf("numbers = %v, want %v (all open, closed since the cut)", numbers, want)
	}
	want2 := PullRequest{
		Number: 2, Title: "fresh", Author: "bob", State: "open", Base: "main", Head: "feat/x", HeadSHA: strings.Repeat("a", 40),
		URL: s.WebURL + "acme/api/pull/2", CreatedAt: now.Add(-5 * day), UpdatedAt: now.Add(-time.Hour),
	}
	if got := byNumber[2]; got != want2 {
		t.Errorf("#2 = %+v\nwant %+v", got, want2)
	}
	for n, state := range map[int]string{1: "open", 3: "closed", 4: "merged", 9: "closed"} {
		if byNumber[n].State != state {
			t.Errorf("#%d state = %q, want %q", n, byNumber[n].State, state)
		}
	}
	if pr := byNumber[7]; pr.Author != "dependabot[bot]" || !pr.AuthorIsBot {
		t.Errorf("#7 = %+v, want a bot author", pr)
	}
	if pr := byNumber[8]; pr.Author != "ghost" || pr.AuthorIsBot {
		t.Errorf("#8 author = %q, want ghost", pr.Author)
	}
	if pr := byNumber[1]; pr.HeadSHA == "" || pr.Head != "feature-1" || pr.Base != "main" {
		t.Errorf("#1 = %+v", pr)
	}
	// Closed pull requests are paged newest first and paging stops at the
	// first one older than the cut: 3, 4, 9, then 10 ends it; 5 and 6 are
	// never fetched.
	if n := countWith(s, "GET /api/v3/repos/acme/api/pulls?", "state=closed", "sort=updated", "direction=desc", "per_page=100"); n != 4 {
		t.Errorf("%d pages of closed pull requests fetched, want 4: %v", n, s.Requests())
	}
	if n := countWith(s, "GET /api/v3/repos/acme/api/pulls?", "state=open", "per_page=100"); n != 4 {
		t.Errorf("%d pages of open pull requests fetched, want 4", n)
	}

	// closedSince zero means all closed ones.
	all, err := a.Installation(instID).PullRequests(context.Background(), "acme/api", time.Time{})
	if err != nil || len(all) != 10 {
		t.Errorf("closedSince zero: %d pull requests, %v", len(all), err)
	}
}

func TestReviewsAndComments(t *testing.T) {
	s, a, _ := appFixture(t)
	now := time.Now().UTC().Truncate(time.Second)
	head := strings.Repeat("b", 40)
	s.AddPullRequest(apiRepo, githubtest.PullRequest{Number: 5, Title: "t", Author: "alice", HeadSHA: head})
	s.AddReview(apiRepo, 5, githubtest.Review{ID: 11, Author: "bob", State: "CHANGES_REQUESTED", Body: "please fix", SubmittedAt: now.Add(-time.Hour)})
	s.AddReview(apiRepo, 5, githubtest.Review{ID: 12, Author: "codelotse[bot]", AuthorType: "Bot", State: "COMMENTED", Body: "findings", SubmittedAt: now, CommitID: strings.Repeat("c", 40)})
	s.AddReview(apiRepo, 5, githubtest.Review{ID: 13, Author: "carol", State: "APPROVED", SubmittedAt: now})
	s.AddReviewComment(apiRepo, 5, githubtest.ReviewComment{
		ID: 101, ReviewID: 11, Author: "bob", Body: "nil check", Path: "a.go", DiffHunk: "@@ -1,3 +1,4 @@\n+x", Line: 4, OriginalLine: 4, CreatedAt: now,
	})
	s.AddReviewComment(apiRepo, 5, githubtest.ReviewComment{
		ID: 102, ReviewID: 11, InReplyTo: 101, Author: "alice", Body: "done", Path: "a.go", DiffHunk: "@@", Line: 4, OriginalLine: 4, CreatedAt: now,
	})
	s.AddReviewComment(apiRepo, 5, githubtest.ReviewComment{
		ID: 103, ReviewID: 12, Author: "codelotse[bot]", AuthorType: "Bot", Body: "outdated", Path: "b.go", StartLine: 0, OriginalLine: 9,
		OriginalCommitID: strings.Repeat("d", 40), CreatedAt: now,
	})
	s.AddReviewComment(apiRepo, 5, githubtest.ReviewComment{
		ID: 104, ReviewID: 11, Author: "bob", Body: "range", Path: "c.go", StartLine: 3, Line: 6, OriginalLine: 6, CreatedAt: now,
	})
	s.SetMaxPerPage(2)
	c := a.Installation(instID)

	reviews, err := c.Reviews(context.Background(), "acme/api", 5)
	if err != nil {
		t.Fatal(err)
	}
	wantReviews := []Review{
		{ID: 11, Author: "bob", State: "CHANGES_REQUESTED", Body: "please fix", CommitID: head, URL: s.WebURL + "acme/api/pull/5#pullrequestreview-11", SubmittedAt: now.Add(-time.Hour)},
		{ID: 12, Author: "codelotse[bot]", AuthorIsBot: true, State: "COMMENTED", Body: "findings", CommitID: strings.Repeat("c", 40), URL: s.WebURL + "acme/api/pull/5#pullrequestreview-12", SubmittedAt: now},
		{ID: 13, Author: "carol", State: "APPROVED", CommitID: head, URL: s.WebURL + "acme/api/pull/5#pullrequestreview-13", SubmittedAt: now},
	}
	if !slices.Equal(reviews, wantReviews) {
		t.Errorf("reviews = %+v\nwant %+v", reviews, wantReviews)
	}

	comments, err := c.ReviewComments(context.Background(), "acme/api", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(comments) != 4 {
		t.Fatalf("%d comments, want 4", len(comments))
	}
	c1 := comments[0]
	if c1.ID != 101 || c1.ReviewID != 11 || c1.InReplyTo != nil || c1.Author != "bob" || c1.Body != "nil check" || c1.Path != "a.go" ||
		c1.DiffHunk != "@@ -1,3 +1,4 @@\n+x" || c1.Line == nil || *c1.Line != 4 || c1.StartLine != nil || c1.OriginalLine == nil || *c1.OriginalLine != 4 ||
		c1.CommitID != head || c1.OriginalCommitID != head || c1.Outdated || c1.URL != s.WebURL+"acme/api/pull/5#discussion_r101" || !c1.CreatedAt.Equal(now) {
		t.Errorf("comment 101 = %+v", c1)
	}
	if c2 := comments[1]; c2.InReplyTo == nil || *c2.InReplyTo != 101 {
		t.Errorf("comment 102 is not a reply to 101: %+v", c2)
	}
	if c3 := comments[2]; !c3.Outdated || c3.Line != nil || c3.OriginalLine == nil || *c3.OriginalLine != 9 || !c3.AuthorIsBot || c3.OriginalCommitID != strings.Repeat("d", 40) {
		t.Errorf("comment 103 = %+v, want outdated, by a bot", c3)
	}
	if c4 := comments[3]; c4.StartLine == nil || *c4.StartLine != 3 || c4.Line == nil || *c4.Line != 6 {
		t.Errorf("comment 104 = %+v, want lines 3-6", c4)
	}
	if n := count(s, "GET /api/v3/repos/acme/api/pulls/5/comments"); n != 2 {
		t.Errorf("%d pages of comments, want 2", n)
	}

	if _, err := c.Reviews(context.Background(), "acme/api", 6); codelotse.ErrorCode(err) != codelotse.NotFound {
		t.Errorf("no such pull request: err = %v", err)
	}
}

func TestCodeScanningAlerts(t *testing.T) {
	s, a, _ := appFixture(t)
	created := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	sha := strings.Repeat("e", 40)
	s.AddCodeScanningAlert(apiRepo, githubtest.CodeScanningAlert{
		Number: 1, RuleID: "go/sql-injection", RuleName: "SQL injection", RuleDescription: "Database query built from user-controlled sources",
		RuleSeverity: "error", SecuritySeverityLevel: "high", Path: "db.go", StartLine: 10, EndLine: 12, Message: "This query depends on a user-provided value.",
		CommitSHA: sha, CreatedAt: created, UpdatedAt: created.Add(time.Hour),
	})
	s.AddCodeScanningAlert(apiRepo, githubtest.CodeScanningAlert{Number: 2, State: "dismissed", RuleID: "go/unused", RuleSeverity: "warning", Path: "x.go", StartLine: 1, EndLine: 1})
	s.AddCodeScanningAlert(apiRepo, githubtest.CodeScanningAlert{Number: 3, State: "fixed", RuleID: "go/xss", RuleSeverity: "error", SecuritySeverityLevel: "medium", Tool: "semgrep"})
	s.AddCodeScanningAlert(apiRepo, githubtest.CodeScanningAlert{Number: 4, RuleID: "go/note", RuleSeverity: "note"})
	s.SetMaxPerPage(1)
	c := a.Installation(instID)

	alerts, err := c.CodeScanningAlerts(context.Background(), "acme/api")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, al := range alerts {
		got = append(got, fmt.Sprintf("%d %s %s %s", al.Number, al.State, al.Severity, al.Tool))
	}
	want := []string{"1 open high CodeQL", "2 dismissed warning CodeQL", "3 fixed medium semgrep", "4 open note CodeQL"}
	if !slices.Equal(got, want) {
		t.Errorf("alerts = %q, want %q", got, want)
	}
	wantFirst := Alert{
		Number: 1, RuleID: "go/sql-injection", RuleName: "SQL injection", RuleDescription: "Database query built from user-controlled sources",
		Severity: "high", State: "open", Tool: "CodeQL", Path: "db.go", StartLine: 10, EndLine: 12,
		Message: "This query depends on a user-provided value.", CommitSHA: sha, URL: s.WebURL + "acme/api/security/code-scanning/1",
		CreatedAt: created, UpdatedAt: created.Add(time.Hour),
	}
	if alerts[0] != wantFirst {
		t.Errorf("alert 1 = %+v\nwant %+v", alerts[0], wantFirst)
	}
	// Every state is asked for, every page followed.
	for state, pages := range map[string]int{"open": 2, "dismissed": 1, "fixed": 1} {
		if n := countWith(s, "GET /api/v3/repos/acme/api/code-scanning/alerts?", "state="+state, "per_page=100"); n != pages {
			t.Errorf("state %s: %d pages fetched, want %d", state, n, pages)
		}
	}

	// Code scanning off: no alerts, no error.
	for _, off := range []githubtest.CodeScanning{githubtest.CodeScanningDisabled, githubtest.CodeScanningNoAnalysis} {
		s.SetCodeScanning(apiRepo, off)
		alerts, err := c.CodeScanningAlerts(context.Background(), "acme/api")
		if err != nil || alerts != nil {
			t.Errorf("code scanning off (%d): %v, %v; want nil, nil", off, alerts, err)
		}
	}
	// A missing permission is the operator's to fix: an error.
	s.SetCodeScanning(apiRepo, githubtest.CodeScanningEnabled)
	s.FailNextOn("/repos/acme/api/code-scanning/alerts", githubtest.Forbidden)
	if _, err := c.CodeScanningAlerts(context.Background(), "acme/api"); codelotse.ErrorCode(err) != codelotse.Forbidden || !strings.Contains(err.Error(), "Resource not accessible by integration") {
		t.Errorf("no permission: err = %v", err)
	}
	// A repository outside the installation is not found.
	if _, err := c.CodeScanningAlerts(context.Background(), "acme/other"); codelotse.ErrorCode(err) != codelotse.NotFound {
		t.Errorf("unknown repository: err = %v", err)
	}
}

func TestHeadCommit(t *testing.T) {
	s, a, _ := appFixture(t)
	c := a.Installation(instID)
	if _, err := c.HeadCommit(context.Background(), "acme/api", "main"); codelotse.ErrorCode(err) != codelotse.Conflict {
		t.Errorf("empty repository: err = %v, want conflict", err)
	}
	mainSHA, featSHA := strings.Repeat("1", 40), strings.Repeat("2", 40)
	s.SetRepoFiles(apiRepo, mainSHA, map[string]string{"a.go": "package a\n"})
	s.SetBranchHead(apiRepo, "feature/x", featSHA)
	for ref, want := range map[string]string{
		"main": mainSHA, "refs/heads/main": mainSHA, "feature/x": featSHA, mainSHA: mainSHA, mainSHA[:7]: mainSHA,
	} {
		got, err := c.HeadCommit(context.Background(), "acme/api", ref)
		if err != nil || got != want {
			t.Errorf("HeadCommit(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	// The sha media type: no commit object with its diff is transferred.
	if n := count(s, "GET /api/v3/repos/acme/api/commits/feature/x"); n != 1 {
		t.Errorf("branch with a slash: requests %v", s.Requests())
	}
	if _, err := c.HeadCommit(context.Background(), "acme/api", "nope"); codelotse.ErrorCode(err) != codelotse.Invalid {
		t.Errorf("unknown ref: err = %v, want invalid", err)
	}
}

func TestArgumentsChecked(t *testing.T) {
	s, a, _ := appFixture(t)
	c := a.Installation(instID)
	ctx := context.Background()
	before := len(s.Requests())
	for _, name := range []string{"", "acme", "acme/", "/api", "acme/api/x", "../api", "acme/..", "acme/a?b", "acme/a b", "acme/a%2F"} {
		if _, err := c.PullRequests(ctx, name, time.Time{}); codelotse.ErrorCode(err) != codelotse.Invalid {
			t.Errorf("PullRequests(%q): err = %v, want invalid", name, err)
		}
	}
	for _, n := range []int{0, -1} {
		if _, err := c.Reviews(ctx, "acme/api", n); codelotse.ErrorCode(err) != codelotse.Invalid {
			t.Errorf("Reviews(%d): err = %v", n, err)
		}
		if _, err := c.ReviewComments(ctx, "acme/api", n); codelotse.ErrorCode(err) != codelotse.Invalid {
			t.Errorf("ReviewComments(%d): err = %v", n, err)
		}
	}
	for _, ref := range []string{"", "..", "a/../b", "a//b", "/a", "a/", "a\x00b", "./a"} {
		if _, err := c.HeadCommit(ctx, "acme/api", ref); codelotse.ErrorCode(err) != codelotse.Invalid {
			t.Errorf("HeadCommit(%q): err = %v", ref, err)
		}
		if ref == "" {
			continue // the default branch, for Archive
		}
		if _, err := c.Archive(ctx, "acme/api", ref); codelotse.ErrorCode(err) != codelotse.Invalid {
			t.Errorf("Archive(%q): err = %v", ref, err)
		}
	}
	zero := a.Installation(0)
	if _, err := zero.Repositories(ctx); codelotse.ErrorCode(err) != codelotse.Invalid {
		t.Errorf("installation 0: err = %v", err)
	}
	if _, err := zero.CodeScanningAlerts(ctx, "acme/api"); codelotse.ErrorCode(err) != codelotse.Invalid {
		t.Errorf("installation 0: err = %v", err)
	}
	if after := len(s.Requests()); after != before {
		t.Errorf("invalid arguments reached GitHub: %v", s.Requests()[before:])
	}
}

func TestPaginationBounds(t *testing.T) {
	s, a, _ := appFixture(t)
	s.AddRepo(instID, githubtest.Repo{ID: 1002, Name: "docs"})
	s.SetMaxPerPage(1)
	a.maxPages = 2
	_, err := a.Installation(instID).Repositories(context.Background())
	if err == nil || codelotse.ErrorCode(err) != codelotse.Unavailable || !strings.Contains(err.Error(), "more than 2 pages") {
		t.Errorf("past the page bound: err = %v", err)
	}
	a.maxPages = 3
	if repos, err := a.Installation(instID).Repositories(context.Background()); err != nil || len(repos) != 3 {
		t.Errorf("at the page bound: %d, %v", len(repos), err)
	}
}

// TestPaginationLinksChecked serves Link headers GitHub would not: to
// another host, and back to an earlier page.
func TestPaginationLinksChecked(t *testing.T) {
	var next string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/app/installations/1/access_tokens" {
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"token":"ghs_x","expires_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
			return
		}
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
		_, _ = fmt.Fprint(w, `{"total_count":9,"repositories":[{"id":1,"full_name":"a/b"}]}`)
	}))
	t.Cleanup(srv.Close)
	s := githubtest.New(t)
	a, err := NewApp(AppConfig{AppID: 1, PrivateKeyPEM: s.AppPrivateKeyPEM(), APIURL: srv.URL + "/api/v3/"})
	if err != nil {
		t.Fatal(err)
	}
	for name, link := range map[string]string{
		"another host":    "https://evil.example/api/v3/installation/repositories?page=2",
		"outside the API": srv.URL + "/elsewhere?page=2",
		"the same page":   srv.URL + "/api/v3/installation/repositories?per_page=100",
	} {
		next = link
		_, err := a.Installation(1).Repositories(context.Background())
		if err == nil || codelotse.ErrorCode(err) != codelotse.Unavailable {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestNextLink(t *testing.T) {
	for header, want := range map[string]string{
		`<https://api.github.com/x?page=2>; rel="next", <https://api.github.com/x?page=5>; rel="last"`: "https://api.github.com/x?page=2",
		`<https://api.github.com/x?page=1>; rel="prev", <https://api.github.com/x?page=3>; rel="next"`: "https://api.github.com/x?page=3",
		`<https://api.github.com/x?after=abc>; rel="next"`:                                             "https://api.github.com/x?after=abc",
		`<https://api.github.com/x?page=1>; rel="first"`:                                               "",
		``:        "",
		`garbage`: "",
	} {
		h := http.Header{}
		if header != "" {
			h.Set("Link", header)
		}
		if got := nextLink(h); got != want {
			t.Errorf("nextLink(%q) = %q, want %q", header, got, want)
		}
	}
}
