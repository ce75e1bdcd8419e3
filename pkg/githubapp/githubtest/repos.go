package githubtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PullRequest is a pull request of a repository added with AddRepo.
type PullRequest struct {
	Number int
	Title  string
	// Author is the opener's login; empty shows "user": null, as GitHub
	// does for some deleted accounts. AuthorType is "User" (the default)
	// or "Bot".
	Author, AuthorType string
	// State is "open" (the default) or "closed"; Merged marks a closed
	// pull request as merged (merged_at set).
	State  string
	Merged bool
	// Base defaults to the repository's default branch, Head to
	// "feature-<number>", HeadSHA to an id derived from the number.
	Base, Head, HeadSHA string
	// CreatedAt and UpdatedAt default to a fixed time in 2024; UpdatedAt
	// defaults to CreatedAt.
	CreatedAt, UpdatedAt time.Time
}

// Review is a review of a pull request.
type Review struct {
	ID                 int64
	Author, AuthorType string
	// State is APPROVED, CHANGES_REQUESTED, COMMENTED (the default),
	// DISMISSED or PENDING.
	State, Body string
	// CommitID defaults to the pull request's HeadSHA.
	CommitID string
	// SubmittedAt zero shows null, as for a pending review.
	SubmittedAt time.Time
}

// ReviewComment is a review comment on a pull request's diff.
type ReviewComment struct {
	ID, ReviewID int64
	// InReplyTo is the first comment of the thread; 0 leaves
	// in_reply_to_id out, as GitHub does for a thread's first comment.
	InReplyTo          int64
	Author, AuthorType string
	Body, Path         string
	DiffHunk           string
	// Line, StartLine and OriginalLine: 0 shows null. A comment with no
	// Line is outdated: GitHub shows line and position as null.
	Line, StartLine, OriginalLine int
	// CommitID defaults to the pull request's HeadSHA, OriginalCommitID to
	// CommitID.
	CommitID, OriginalCommitID string
	CreatedAt                  time.Time
	// Resolved marks the thread this comment starts as resolved (GraphQL
	// isResolved; see ResolveThread). Replies ignore it.
	Resolved bool
}

// CodeScanningAlert is a code-scanning alert of a repository.
type CodeScanningAlert struct {
	Number int
	// State is "open" (the default), "dismissed" or "fixed".
	State                             string
	RuleID, RuleName, RuleDescription string
	// RuleSeverity is none, note, warning (the default) or error;
	// SecuritySeverityLevel is low, medium, high, critical, or empty for
	// null (rules that are not security rules).
	RuleSeverity, SecuritySeverityLevel string
	// Tool defaults to "CodeQL".
	Tool                 string
	Path                 string
	StartLine, EndLine   int
	Message, CommitSHA   string
	CreatedAt, UpdatedAt time.Time
}

// CodeScanning is whether a repository's code-scanning alerts can be read.
type CodeScanning int

const (
	// CodeScanningEnabled: the alerts are listed (the default).
	CodeScanningEnabled CodeScanning = iota
	// CodeScanningNoAnalysis: 404 "no analysis found", as for a repository
	// code scanning has never run on.
	CodeScanningNoAnalysis
	// CodeScanningDisabled: 403 "Advanced Security must be enabled for this
	// repository to use code scanning."
	CodeScanningDisabled
)

type pullKey struct {
	repoID int64
	number int
}

type codeloadGrant struct {
	repoID  int64
	sha     string
	expires time.Time
}

// codeloadPrefix is where archive downloads are served, standing in for
// codeload.github.com (GitHub Enterprise Server uses HOST/_codeload/).
const codeloadPrefix = "/_codeload/"

// codeloadLifetime is how long an archive download URL works.
const codeloadLifetime = 5 * time.Minute

// fixed is the default time of pull requests, reviews and alerts.
var fixed = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// AddPullRequest adds a pull request to a repository.
func (s *Server) AddPullRequest(repoID int64, pr PullRequest) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepo("AddPullRequest", repoID)
	if pr.Number <= 0 {
		s.t.Fatalf("githubtest: AddPullRequest: a pull request needs a number > 0")
	}
	if s.pull(repoID, pr.Number) != nil {
		s.t.Fatalf("githubtest: AddPullRequest: repository %d already has pull request %d", repoID, pr.Number)
	}
	switch pr.State {
	case "":
		pr.State = "open"
	case "open", "closed":
	default:
		s.t.Fatalf("githubtest: AddPullRequest: state must be open or closed, not %q", pr.State)
	}
	if pr.Merged && pr.State != "closed" {
		s.t.Fatalf("githubtest: AddPullRequest: a merged pull request is closed")
	}
	if pr.AuthorType == "" {
		pr.AuthorType = TypeUser
	}
	if pr.Base == "" {
		pr.Base = r.DefaultBranch
	}
	if pr.Head == "" {
		pr.Head = fmt.Sprintf("feature-%d", pr.Number)
	}
	if pr.HeadSHA == "" {
		pr.HeadSHA = fakeSHA(fmt.Sprintf("pull %d %d", repoID, pr.Number))
	}
	if pr.CreatedAt.IsZero() {
		pr.CreatedAt = fixed
	}
	if pr.UpdatedAt.IsZero() {
		pr.UpdatedAt = pr.CreatedAt
	}
	s.pulls[repoID] = append(s.pulls[repoID], &pr)
}

// AddReview adds a review to a pull request added with AddPullRequest.
func (s *Server) AddReview(repoID int64, number int, rv Review) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo("AddReview", repoID)
	pr := s.pull(repoID, number)
	if pr == nil {
		s.t.Fatalf("githubtest: AddReview: repository %d has no pull request %d", repoID, number)
	}
	if rv.ID <= 0 {
		s.t.Fatalf("githubtest: AddReview: a review needs an id > 0")
	}
	if rv.State == "" {
		rv.State = "COMMENTED"
	}
	if rv.AuthorType == "" {
		rv.AuthorType = TypeUser
	}
	if rv.CommitID == "" {
		rv.CommitID = pr.HeadSHA
	}
	k := pullKey{repoID, number}
	s.reviews[k] = append(s.reviews[k], &rv)
}

// AddReviewComment adds a review comment to a pull request added with
// AddPullRequest.
func (s *Server) AddReviewComment(repoID int64, number int, c ReviewComment) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo("AddReviewComment", repoID)
	pr := s.pull(repoID, number)
	if pr == nil {
		s.t.Fatalf("githubtest: AddReviewComment: repository %d has no pull request %d", repoID, number)
	}
	if c.ID <= 0 {
		s.t.Fatalf("githubtest: AddReviewComment: a comment needs an id > 0")
	}
	if c.AuthorType == "" {
		c.AuthorType = TypeUser
	}
	if c.CommitID == "" {
		c.CommitID = pr.HeadSHA
	}
	if c.OriginalCommitID == "" {
		c.OriginalCommitID = c.CommitID
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = fixed
	}
	k := pullKey{repoID, number}
	s.comments[k] = append(s.comments[k], &c)
}

// AddCodeScanningAlert adds a code-scanning alert to a repository.
func (s *Server) AddCodeScanningAlert(repoID int64, a CodeScanningAlert) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo("AddCodeScanningAlert", repoID)
	if a.Number <= 0 {
		s.t.Fatalf("githubtest: AddCodeScanningAlert: an alert needs a number > 0")
	}
	switch a.State {
	case "":
		a.State = "open"
	case "open", "dismissed", "fixed":
	default:
		s.t.Fatalf("githubtest: AddCodeScanningAlert: state must be open, dismissed or fixed, not %q", a.State)
	}
	if a.RuleSeverity == "" {
		a.RuleSeverity = "warning"
	}
	if a.Tool == "" {
		a.Tool = "CodeQL"
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = fixed
	}
	if a.UpdatedAt.IsZero() {
		a.UpdatedAt = a.CreatedAt
	}
	s.alerts[repoID] = append(s.alerts[repoID], &a)
}

// SetCodeScanning sets whether the repository's alerts can be read.
func (s *Server) SetCodeScanning(repoID int64, c CodeScanning) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo("SetCodeScanning", repoID)
	s.codeScanning[repoID] = c
}

// SetRepoFiles makes commit (40 hex digits) a commit of the repository
// whose tree is files (slash-separated path → content). The tarball
// endpoint serves it. If the default branch has no head yet, it points
// at commit.
func (s *Server) SetRepoFiles(repoID int64, commit string, files map[string]string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepo("SetRepoFiles", repoID)
	if !isSHA(commit) {
		s.t.Fatalf("githubtest: SetRepoFiles: commit %q is not 40 lowercase hex digits", commit)
	}
	for p := range files {
		if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p {
			s.t.Fatalf("githubtest: SetRepoFiles: path %q is not a clean relative path", p)
		}
	}
	if s.commits[repoID] == nil {
		s.commits[repoID] = map[string]map[string]string{}
	}
	s.commits[repoID][commit] = maps.Clone(files)
	if s.heads[repoID] == nil {
		s.heads[repoID] = map[string]string{}
	}
	if _, ok := s.heads[repoID][r.DefaultBranch]; !ok {
		s.heads[repoID][r.DefaultBranch] = commit
	}
}

// SetBranchHead points a branch of the repository at commit (40 hex
// digits), creating the branch if needed.
func (s *Server) SetBranchHead(repoID int64, branch, commit string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo("SetBranchHead", repoID)
	if branch == "" || !isSHA(commit) {
		s.t.Fatalf("githubtest: SetBranchHead: need a branch and a commit of 40 lowercase hex digits")
	}
	if s.heads[repoID] == nil {
		s.heads[repoID] = map[string]string{}
	}
	s.heads[repoID][branch] = commit
}

func (s *Server) mustRepo(op string, repoID int64) *repo {
	s.t.Helper()
	r, ok := s.repos[repoID]
	if !ok {
		s.t.Fatalf("githubtest: %s: no repository %d", op, repoID)
	}
	return r
}

func (s *Server) pull(repoID int64, number int) *PullRequest {
	for _, pr := range s.pulls[repoID] {
		if pr.Number == number {
			return pr
		}
	}
	return nil
}

func isSHA(s string) bool {
	_, err := hex.DecodeString(s)
	return len(s) == 40 && err == nil && strings.ToLower(s) == s
}

// fakeSHA derives a stable commit-like id from seed.
func fakeSHA(seed string) string {
	h := fnv.New128a()
	h.Write([]byte(seed))
	sum := hex.EncodeToString(h.Sum(nil))
	return (sum + sum)[:40]
}

// repoAPI serves /repos/{owner}/{repo}/… to a token of installationID.
func (s *Server) repoAPI(w http.ResponseWriter, r *http.Request, installationID int64, p string) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if len(parts) < 4 {
		writeJSON(w, http.StatusNotFound, notFound())
		return
	}
	rp := s.repoByName(parts[1], parts[2])
	if rp == nil || rp.installationID != installationID {
		writeJSON(w, http.StatusNotFound, notFound())
		return
	}
	rest := parts[3:]
	switch {
	case len(rest) == 1 && rest[0] == "pulls":
		s.listPulls(w, r, rp)
	case len(rest) == 2 && rest[0] == "pulls":
		n, err := strconv.Atoi(rest[1])
		pr := s.pull(rp.ID, n)
		if err != nil || pr == nil {
			writeJSON(w, http.StatusNotFound, notFound())
			return
		}
		writeJSON(w, http.StatusOK, s.pullJSON(rp, pr))
	case len(rest) == 3 && rest[0] == "pulls" && (rest[2] == "reviews" || rest[2] == "comments"):
		n, err := strconv.Atoi(rest[1])
		pr := s.pull(rp.ID, n)
		if err != nil || pr == nil {
			writeJSON(w, http.StatusNotFound, notFound())
			return
		}
		var list []any
		if rest[2] == "reviews" {
			for _, rv := range sortedByID(s.reviews[pullKey{rp.ID, n}], func(rv *Review) int64 { return rv.ID }) {
				list = append(list, s.reviewJSON(rp, pr, rv))
			}
		} else {
			for _, c := range sortedByID(s.comments[pullKey{rp.ID, n}], func(c *ReviewComment) int64 { return c.ID }) {
				list = append(list, s.reviewCommentJSON(rp, pr, c))
			}
		}
		if page, ok := s.paginate(w, r, list); ok {
			writeJSON(w, http.StatusOK, page)
		}
	case len(rest) == 2 && rest[0] == "compare":
		s.compare(w, r, rp, rest[1])
	case len(rest) >= 2 && rest[0] == "contents":
		s.contents(w, r, rp, strings.Join(rest[1:], "/"))
	case len(rest) == 1 && rest[0] == "collaborators":
		s.listCollaborators(w, r, rp)
	case len(rest) == 2 && rest[0] == "code-scanning" && rest[1] == "alerts":
		s.listAlerts(w, r, rp)
	case len(rest) >= 2 && rest[0] == "commits":
		s.commit(w, r, rp, strings.Join(rest[1:], "/"))
	case rest[0] == "tarball":
		s.tarball(w, r, rp, strings.Join(rest[1:], "/"))
	default:
		writeJSON(w, http.StatusNotFound, notFound())
	}
}

func sortedByID[T any](items []T, id func(T) int64) []T {
	out := slices.Clone(items)
	slices.SortFunc(out, func(a, b T) int { return compareInt64(id(a), id(b)) })
	return out
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *Server) repoByName(owner, name string) *repo {
	for _, r := range s.repos {
		login, _, _ := s.account(s.installation(r.installationID).accountID)
		if strings.EqualFold(login, owner) && strings.EqualFold(r.Name, name) {
			return r
		}
	}
	return nil
}

func (s *Server) fullName(r *repo) string {
	owner, _, _ := s.account(s.installation(r.installationID).accountID)
	return owner + "/" + r.Name
}

func unprocessable(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": "422"})
}

// listPulls is GET /repos/{owner}/{repo}/pulls with GitHub's state, sort
// and direction (desc by default for sort=created, asc otherwise).
func (s *Server) listPulls(w http.ResponseWriter, r *http.Request, rp *repo) {
	q := r.URL.Query()
	state := q.Get("state")
	switch state {
	case "":
		state = "open"
	case "open", "closed", "all":
	default:
		unprocessable(w, "Validation Failed: state")
		return
	}
	sortBy := q.Get("sort")
	switch sortBy {
	case "":
		sortBy = "created"
	case "created", "updated", "popularity", "long-running":
	default:
		unprocessable(w, "Validation Failed: sort")
		return
	}
	direction := q.Get("direction")
	switch direction {
	case "":
		direction = "asc"
		if sortBy == "created" {
			direction = "desc"
		}
	case "asc", "desc":
	default:
		unprocessable(w, "Validation Failed: direction")
		return
	}
	var prs []*PullRequest
	for _, pr := range s.pulls[rp.ID] {
		if state == "all" || pr.State == state {
			prs = append(prs, pr)
		}
	}
	key := func(pr *PullRequest) time.Time { return pr.CreatedAt }
	if sortBy == "updated" {
		key = func(pr *PullRequest) time.Time { return pr.UpdatedAt }
	}
	slices.SortStableFunc(prs, func(a, b *PullRequest) int {
		c := key(a).Compare(key(b))
		if c == 0 {
			c = a.Number - b.Number
		}
		if direction == "desc" {
			return -c
		}
		return c
	})
	list := make([]any, 0, len(prs))
	for _, pr := range prs {
		list = append(list, s.pullJSON(rp, pr))
	}
	if page, ok := s.paginate(w, r, list); ok {
		writeJSON(w, http.StatusOK, page)
	}
}

// listAlerts is GET /repos/{owner}/{repo}/code-scanning/alerts. Without a
// state it lists open alerts only, as GitHub long documented.
func (s *Server) listAlerts(w http.ResponseWriter, r *http.Request, rp *repo) {
	switch s.codeScanning[rp.ID] {
	case CodeScanningDisabled:
		writeJSON(w, http.StatusForbidden, map[string]any{
			"message":           "Advanced Security must be enabled for this repository to use code scanning.",
			"documentation_url": "https://docs.github.com/rest/code-scanning/code-scanning#list-code-scanning-alerts-for-a-repository",
			"status":            "403",
		})
		return
	case CodeScanningNoAnalysis:
		writeJSON(w, http.StatusNotFound, map[string]any{
			"message":           "no analysis found",
			"documentation_url": "https://docs.github.com/rest/code-scanning/code-scanning#list-code-scanning-alerts-for-a-repository",
			"status":            "404",
		})
		return
	}
	state := r.URL.Query().Get("state")
	var want func(string) bool
	switch state {
	case "", "open":
		want = func(st string) bool { return st == "open" }
	case "closed":
		want = func(st string) bool { return st != "open" }
	case "dismissed", "fixed":
		want = func(st string) bool { return st == state }
	default:
		unprocessable(w, "Invalid state")
		return
	}
	var alerts []*CodeScanningAlert
	for _, a := range s.alerts[rp.ID] {
		if want(a.State) {
			alerts = append(alerts, a)
		}
	}
	// Newest first: GitHub's default sort is created, descending.
	slices.SortFunc(alerts, func(a, b *CodeScanningAlert) int { return b.Number - a.Number })
	list := make([]any, 0, len(alerts))
	for _, a := range alerts {
		list = append(list, s.alertJSON(rp, a))
	}
	if page, ok := s.paginate(w, r, list); ok {
		writeJSON(w, http.StatusOK, page)
	}
}

// resolve finds the commit a ref names: a branch ("main", "heads/main",
// "refs/heads/main") or a commit id, full or abbreviated to 7+ digits.
func (s *Server) resolve(rp *repo, ref string) (string, bool) {
	heads := s.heads[rp.ID]
	for _, b := range []string{ref, strings.TrimPrefix(ref, "heads/"), strings.TrimPrefix(ref, "refs/heads/")} {
		if sha, ok := heads[b]; ok {
			return sha, true
		}
	}
	if len(ref) < 7 || len(ref) > 40 {
		return "", false
	}
	known := map[string]bool{}
	for sha := range s.commits[rp.ID] {
		known[sha] = true
	}
	for _, sha := range heads {
		known[sha] = true
	}
	var found string
	for sha := range known {
		if strings.HasPrefix(sha, strings.ToLower(ref)) {
			if found != "" {
				return "", false // ambiguous
			}
			found = sha
		}
	}
	return found, found != ""
}

// commit is GET /repos/{owner}/{repo}/commits/{ref}.
func (s *Server) commit(w http.ResponseWriter, r *http.Request, rp *repo, ref string) {
	if len(s.heads[rp.ID]) == 0 && len(s.commits[rp.ID]) == 0 {
		writeJSON(w, http.StatusConflict, map[string]any{"message": "Git Repository is empty.", "documentation_url": "https://docs.github.com/rest/commits/commits#get-a-commit", "status": "409"})
		return
	}
	sha, ok := s.resolve(rp, ref)
	if !ok {
		unprocessable(w, "No commit found for SHA: "+ref)
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "application/vnd.github.sha") {
		w.Header().Set("Content-Type", "application/vnd.github.sha; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(sha))
		return
	}
	full := s.fullName(rp)
	writeJSON(w, http.StatusOK, map[string]any{
		"sha":     sha,
		"node_id": "C_" + sha[:12],
		"commit": map[string]any{
			"author":    map[string]any{"name": "Octo Cat", "email": "octocat@example.com", "date": timestamp},
			"committer": map[string]any{"name": "Octo Cat", "email": "octocat@example.com", "date": timestamp},
			"message":   "commit " + sha[:7],
			"tree":      map[string]any{"sha": fakeSHA("tree " + sha), "url": s.APIURL + "repos/" + full + "/git/trees/" + fakeSHA("tree "+sha)},
			"url":       s.APIURL + "repos/" + full + "/git/commits/" + sha,
		},
		"url":          s.APIURL + "repos/" + full + "/commits/" + sha,
		"html_url":     s.WebURL + full + "/commit/" + sha,
		"comments_url": s.APIURL + "repos/" + full + "/commits/" + sha + "/comments",
		"author":       nil,
		"committer":    nil,
		"parents":      []any{},
		"stats":        map[string]int{"total": 0, "additions": 0, "deletions": 0},
		"files":        []any{},
	})
}

// tarball is GET /repos/{owner}/{repo}/tarball[/{ref}]: like GitHub, a
// redirect to a download URL that carries its own short-lived token.
func (s *Server) tarball(w http.ResponseWriter, r *http.Request, rp *repo, ref string) {
	if ref == "" {
		ref = rp.DefaultBranch
	}
	sha, ok := s.resolve(rp, ref)
	if _, has := s.commits[rp.ID][sha]; !ok || !has {
		writeJSON(w, http.StatusNotFound, notFound())
		return
	}
	tok := randomString(40)
	s.codeloadTokens[tok] = &codeloadGrant{repoID: rp.ID, sha: sha, expires: time.Now().Add(codeloadLifetime)}
	target := s.URL + codeloadPrefix + s.fullName(rp) + "/legacy.tar.gz/" + sha + "?token=" + url.QueryEscape(tok)
	w.Header().Set("Location", target)
	w.Header().Set("Content-Type", "text/html;charset=utf-8")
	w.WriteHeader(http.StatusFound)
}

// codeload serves an archive download: GET
// /_codeload/{owner}/{repo}/legacy.tar.gz/{sha}?token=T.
func (s *Server) codeload(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.takeFailure(r.URL.Path); ok {
		s.fail(w, f)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, codeloadPrefix), "/")
	g, ok := s.codeloadTokens[r.URL.Query().Get("token")]
	if r.Method != http.MethodGet || len(parts) != 4 || parts[2] != "legacy.tar.gz" || !ok || !time.Now().Before(g.expires) {
		http.Error(w, "404: Not Found", http.StatusNotFound)
		return
	}
	rp := s.repos[g.repoID]
	if rp == nil || !strings.EqualFold(parts[0]+"/"+parts[1], s.fullName(rp)) || parts[3] != g.sha {
		http.Error(w, "404: Not Found", http.StatusNotFound)
		return
	}
	owner, _, _ := s.account(s.installation(rp.installationID).accountID)
	top := owner + "-" + rp.Name + "-" + g.sha[:7]
	archive, err := buildTarball(top, g.sha, s.commits[rp.ID][g.sha])
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-gzip")
	w.Header().Set("Content-Disposition", "attachment; filename="+top+".tar.gz")
	w.Header().Set("Content-Length", strconv.Itoa(len(archive)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(archive)
}

// buildTarball writes what `git archive` writes for GitHub: a pax global
// header whose comment is the commit id, then the top directory, every
// directory and every file, in path order.
func buildTarball(top, sha string, files map[string]string) ([]byte, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	mtime := fixed
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": sha}, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	dirs := map[string]bool{"": true}
	for p := range files {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var names []string // directories end in "/"; "" is the top directory
	for d := range dirs {
		if d != "" {
			d += "/"
		}
		names = append(names, d)
	}
	for p := range files {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, n := range names {
		full := top + "/" + n
		if n == "" || strings.HasSuffix(n, "/") {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: full, Mode: 0o775, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
			continue
		}
		content := files[n]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: full, Mode: 0o664, Size: int64(len(content)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// loginUser is the "simple user" for a login: the account's, if the server
// has one by that login, or a made-up one of type typ.
func (s *Server) loginUser(login, typ string) any {
	if login == "" {
		return nil
	}
	if id, ok := s.accountByLogin(login); ok {
		return s.simpleUser(id)
	}
	h := fnv.New32a()
	h.Write([]byte(login))
	id := int64(h.Sum32()) + 1_000_000
	api := s.APIURL + "users/" + login
	return map[string]any{
		"login":      login,
		"id":         id,
		"node_id":    fmt.Sprintf("MDQ6VXNlcj%d", id),
		"avatar_url": fmt.Sprintf("%savatars/u/%d?v=4", s.WebURL, id),
		"url":        api,
		"html_url":   s.WebURL + login,
		"type":       typ,
		"site_admin": false,
	}
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func nullableInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

func (s *Server) branchJSON(rp *repo, ref, sha string) map[string]any {
	owner, _, _ := s.account(s.installation(rp.installationID).accountID)
	return map[string]any{
		"label": owner + ":" + ref,
		"ref":   ref,
		"sha":   sha,
		"user":  s.simpleUser(s.installation(rp.installationID).accountID),
		"repo":  s.repoJSON(rp, "pull"),
	}
}

func (s *Server) pullJSON(rp *repo, pr *PullRequest) map[string]any {
	full := s.fullName(rp)
	api := fmt.Sprintf("%srepos/%s/pulls/%d", s.APIURL, full, pr.Number)
	html := fmt.Sprintf("%s%s/pull/%d", s.WebURL, full, pr.Number)
	var closedAt, mergedAt, mergeSHA any
	if pr.State == "closed" {
		closedAt = ts(pr.UpdatedAt)
		if pr.Merged {
			mergedAt = ts(pr.UpdatedAt)
			mergeSHA = fakeSHA("merge " + pr.HeadSHA)
		}
	}
	return map[string]any{
		"url":                 api,
		"id":                  rp.ID*100_000 + int64(pr.Number),
		"node_id":             fmt.Sprintf("PR_%d_%d", rp.ID, pr.Number),
		"html_url":            html,
		"diff_url":            html + ".diff",
		"patch_url":           html + ".patch",
		"issue_url":           fmt.Sprintf("%srepos/%s/issues/%d", s.APIURL, full, pr.Number),
		"number":              pr.Number,
		"state":               pr.State,
		"locked":              false,
		"title":               pr.Title,
		"user":                s.loginUser(pr.Author, pr.AuthorType),
		"body":                nil,
		"labels":              []any{},
		"created_at":          ts(pr.CreatedAt),
		"updated_at":          ts(pr.UpdatedAt),
		"closed_at":           closedAt,
		"merged_at":           mergedAt,
		"merge_commit_sha":    mergeSHA,
		"assignee":            nil,
		"assignees":           []any{},
		"requested_reviewers": []any{},
		"draft":               false,
		"commits_url":         api + "/commits",
		"review_comments_url": api + "/comments",
		"comments_url":        fmt.Sprintf("%srepos/%s/issues/%d/comments", s.APIURL, full, pr.Number),
		"head":                s.branchJSON(rp, pr.Head, pr.HeadSHA),
		"base":                s.branchJSON(rp, pr.Base, fakeSHA("base "+pr.Base)),
		"author_association":  "MEMBER",
		"auto_merge":          nil,
		"active_lock_reason":  nil,
	}
}

func (s *Server) reviewJSON(rp *repo, pr *PullRequest, rv *Review) map[string]any {
	full := s.fullName(rp)
	html := fmt.Sprintf("%s%s/pull/%d#pullrequestreview-%d", s.WebURL, full, pr.Number, rv.ID)
	prURL := fmt.Sprintf("%srepos/%s/pulls/%d", s.APIURL, full, pr.Number)
	m := map[string]any{
		"id":                 rv.ID,
		"node_id":            fmt.Sprintf("PRR_%d", rv.ID),
		"user":               s.loginUser(rv.Author, rv.AuthorType),
		"body":               rv.Body,
		"state":              rv.State,
		"html_url":           html,
		"pull_request_url":   prURL,
		"author_association": "MEMBER",
		"_links":             map[string]any{"html": map[string]string{"href": html}, "pull_request": map[string]string{"href": prURL}},
		"commit_id":          rv.CommitID,
	}
	if !rv.SubmittedAt.IsZero() {
		m["submitted_at"] = ts(rv.SubmittedAt)
	}
	return m
}

func (s *Server) reviewCommentJSON(rp *repo, pr *PullRequest, c *ReviewComment) map[string]any {
	full := s.fullName(rp)
	api := fmt.Sprintf("%srepos/%s/pulls/comments/%d", s.APIURL, full, c.ID)
	html := fmt.Sprintf("%s%s/pull/%d#discussion_r%d", s.WebURL, full, pr.Number, c.ID)
	prURL := fmt.Sprintf("%srepos/%s/pulls/%d", s.APIURL, full, pr.Number)
	var startSide any
	if c.StartLine != 0 {
		startSide = "RIGHT"
	}
	m := map[string]any{
		"url":                    api,
		"pull_request_review_id": c.ReviewID,
		"id":                     c.ID,
		"node_id":                fmt.Sprintf("PRRC_%d", c.ID),
		"diff_hunk":              c.DiffHunk,
		"path":                   c.Path,
		"position":               nullableInt(c.Line),
		"original_position":      nullableInt(c.OriginalLine),
		"commit_id":              c.CommitID,
		"original_commit_id":     c.OriginalCommitID,
		"user":                   s.loginUser(c.Author, c.AuthorType),
		"body":                   c.Body,
		"created_at":             ts(c.CreatedAt),
		"updated_at":             ts(c.CreatedAt),
		"html_url":               html,
		"pull_request_url":       prURL,
		"author_association":     "MEMBER",
		"_links": map[string]any{
			"self": map[string]string{"href": api}, "html": map[string]string{"href": html}, "pull_request": map[string]string{"href": prURL},
		},
		"start_line":          nullableInt(c.StartLine),
		"original_start_line": nullableInt(c.StartLine),
		"start_side":          startSide,
		"line":                nullableInt(c.Line),
		"original_line":       nullableInt(c.OriginalLine),
		"side":                "RIGHT",
		"subject_type":        "line",
	}
	if c.InReplyTo != 0 {
		m["in_reply_to_id"] = c.InReplyTo
	}
	return m
}

func (s *Server) alertJSON(rp *repo, a *CodeScanningAlert) map[string]any {
	full := s.fullName(rp)
	api := fmt.Sprintf("%srepos/%s/code-scanning/alerts/%d", s.APIURL, full, a.Number)
	var fixedAt, dismissedAt, dismissedBy, dismissedReason any
	switch a.State {
	case "fixed":
		fixedAt = ts(a.UpdatedAt)
	case "dismissed":
		dismissedAt = ts(a.UpdatedAt)
		dismissedBy = s.simpleUser(s.installation(rp.installationID).accountID)
		dismissedReason = "false positive"
	}
	return map[string]any{
		"number":            a.Number,
		"created_at":        ts(a.CreatedAt),
		"updated_at":        ts(a.UpdatedAt),
		"url":               api,
		"html_url":          fmt.Sprintf("%s%s/security/code-scanning/%d", s.WebURL, full, a.Number),
		"instances_url":     api + "/instances",
		"state":             a.State,
		"fixed_at":          fixedAt,
		"dismissed_by":      dismissedBy,
		"dismissed_at":      dismissedAt,
		"dismissed_reason":  dismissedReason,
		"dismissed_comment": nil,
		"rule": map[string]any{
			"id":                      a.RuleID,
			"severity":                a.RuleSeverity,
			"description":             a.RuleDescription,
			"name":                    a.RuleName,
			"tags":                    []string{"security"},
			"security_severity_level": nullable(a.SecuritySeverityLevel),
		},
		"tool": map[string]any{"name": a.Tool, "guid": nil, "version": "2.17.0"},
		"most_recent_instance": map[string]any{
			"ref":          "refs/heads/" + rp.DefaultBranch,
			"analysis_key": ".github/workflows/codeql.yml:analyze",
			"environment":  "{}",
			"category":     ".github/workflows/codeql.yml:analyze",
			"state":        a.State,
			"commit_sha":   a.CommitSHA,
			"message":      map[string]any{"text": a.Message},
			"location": map[string]any{
				"path": a.Path, "start_line": a.StartLine, "end_line": a.EndLine, "start_column": 1, "end_column": 1,
			},
			"classifications": []any{},
		},
	}
}
