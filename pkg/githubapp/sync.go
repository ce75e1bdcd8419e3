package githubapp

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// PullRequest is a pull request as the sync stores it.
type PullRequest struct {
	Number int
	Title  string
	// Author is the opener's login; "ghost" for a deleted account.
	Author      string
	AuthorIsBot bool
	// State is "open", "closed" (without merging) or "merged".
	State string
	// Base and Head are branch names; HeadSHA is the head commit.
	Base, Head, HeadSHA string
	// URL is the pull request's web page.
	URL                  string
	CreatedAt, UpdatedAt time.Time
}

// Review is a submitted pull-request review.
type Review struct {
	ID          int64
	Author      string
	AuthorIsBot bool
	// State is GitHub's: APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED
	// (PENDING reviews are visible only to their author, never to an app).
	State, Body string
	// CommitID is the head commit the review was made on.
	CommitID, URL string
	SubmittedAt   time.Time
}

// ReviewComment is a comment on a line of a pull request's diff.
type ReviewComment struct {
	ID int64
	// ReviewID is the review the comment belongs to (every review comment
	// is part of one, if only a single-comment review).
	ReviewID int64
	// InReplyTo is the first comment of the thread when this is a reply.
	InReplyTo   *int64
	Author      string
	AuthorIsBot bool
	Body, Path  string
	DiffHunk    string
	// Line is the line in the current diff (nil when the comment no longer
	// applies to it); StartLine the first line of a multi-line comment;
	// OriginalLine the line in the diff the comment was written on.
	Line, StartLine, OriginalLine *int
	CommitID, OriginalCommitID    string
	URL                           string
	// Outdated is Line == nil: GitHub no longer places the comment on the
	// current diff because the code it was on has changed.
	Outdated  bool
	CreatedAt time.Time
}

// Alert is a code-scanning alert.
type Alert struct {
	Number                            int
	RuleID, RuleName, RuleDescription string
	// Severity is the rule's security severity (critical, high, medium,
	// low) when it has one, else its severity (error, warning, note).
	Severity string
	// State is "open", "dismissed" or "fixed".
	State string
	Tool  string
	// Path, StartLine and EndLine locate the most recent instance on the
	// default branch; Message and CommitSHA are that instance's.
	Path               string
	StartLine, EndLine int
	Message, CommitSHA string
	URL                string
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Repositories lists the repositories the installation can reach
// (GET /installation/repositories), all pages. Permission is empty: it
// describes a user's access, and this is the app's.
func (c *InstallationClient) Repositories(ctx context.Context) ([]Repo, error) {
	if err := c.valid(); err != nil {
		return nil, err
	}
	const path = "installation/repositories"
	raw, err := list(ctx, c, "GET /"+path, c.app.endpoint(path, url.Values{"per_page": {strconv.Itoa(perPage)}}),
		func(body []byte) ([]*github.Repository, error) {
			var page github.ListRepositories
			err := json.Unmarshal(body, &page)
			return page.Repositories, err
		}, nil)
	if err != nil {
		return nil, err
	}
	repos := make([]Repo, 0, len(raw))
	for _, r := range raw {
		if r.GetID() == 0 || r.GetFullName() == "" {
			return nil, incomplete("GET /"+path, "a repository has no id or name")
		}
		repos = append(repos, Repo{
			ID:            r.GetID(),
			FullName:      r.GetFullName(),
			DefaultBranch: r.GetDefaultBranch(),
			URL:           r.GetHTMLURL(),
			Private:       r.GetPrivate(),
			Archived:      r.GetArchived(),
		})
	}
	return repos, nil
}

// PullRequests lists the repository's open pull requests, all of them,
// and its closed ones updated at or after closedSince (all of them when
// closedSince is zero), ordered by number.
//
// These are two listings: state=open, and state=closed sorted by update,
// newest first, whose paging stops at the first pull request updated
// before closedSince. One listing of state=all sorted by update could not
// stop early without losing open pull requests nobody has touched lately.
// A pull request that closes between the two listings can appear in both;
// the later update wins.
func (c *InstallationClient) PullRequests(ctx context.Context, fullName string, closedSince time.Time) ([]PullRequest, error) {
	base, err := c.repoPath(fullName)
	if err != nil {
		return nil, err
	}
	path := base + "/pulls"
	decode := decodeList[*github.PullRequest]
	open, err := list(ctx, c, "GET /"+path+"?state=open", c.app.endpoint(path, url.Values{
		"state": {"open"}, "sort": {"created"}, "direction": {"desc"}, "per_page": {strconv.Itoa(perPage)},
	}), decode, nil)
	if err != nil {
		return nil, err
	}
	closed, err := list(ctx, c, "GET /"+path+"?state=closed", c.app.endpoint(path, url.Values{
		"state": {"closed"}, "sort": {"updated"}, "direction": {"desc"}, "per_page": {strconv.Itoa(perPage)},
	}), decode, func(pr *github.PullRequest) bool {
		return !pr.GetUpdatedAt().Time.Before(closedSince)
	})
	if err != nil {
		return nil, err
	}
	byNumber := map[int]PullRequest{}
	for _, raw := range slices.Concat(open, closed) {
		pr := pullRequest(raw)
		if pr.Number <= 0 {
			return nil, incomplete("GET /"+path, "a pull request has no number")
		}
		if prev, ok := byNumber[pr.Number]; !ok || pr.UpdatedAt.After(prev.UpdatedAt) {
			byNumber[pr.Number] = pr
		}
	}
	prs := make([]PullRequest, 0, len(byNumber))
	for _, pr := range byNumber {
		prs = append(prs, pr)
	}
	slices.SortFunc(prs, func(a, b PullRequest) int { return a.Number - b.Number })
	return prs, nil
}

// PullRequest reads one pull request (GET /repos/{owner}/{repo}/pulls/{n}),
// for one the listings may have missed: an open listing is paged, and a
// pull request closing between two pages shifts the next page's first
// one out of both. A pull request that is gone answers NotFound.
func (c *InstallationClient) PullRequest(ctx context.Context, fullName string, number int) (PullRequest, error) {
	path, err := c.pullPath(fullName, number, "")
	if err != nil {
		return PullRequest{}, err
	}
	path = strings.TrimSuffix(path, "/")
	op := "GET /" + path
	var raw github.PullRequest
	if err := c.app.getJSON(ctx, &request{
		op:    op,
		url:   c.app.endpoint(path, nil),
		cred:  c,
		limit: &c.st.limit,
	}, &raw); err != nil {
		return PullRequest{}, err
	}
	pr := pullRequest(&raw)
	if pr.Number != number {
		return PullRequest{}, incomplete(op, "the answer is another pull request")
	}
	return pr, nil
}

func pullRequest(pr *github.PullRequest) PullRequest {
	state := pr.GetState()
	if state == "closed" && pr.MergedAt != nil {
		state = "merged"
	}
	author, bot := login(pr.User)
	return PullRequest{
		Number:      pr.GetNumber(),
		Title:       pr.GetTitle(),
		Author:      author,
		AuthorIsBot: bot,
		State:       state,
		Base:        pr.GetBase().GetRef(),
		Head:        pr.GetHead().GetRef(),
		HeadSHA:     pr.GetHead().GetSHA(),
		URL:         pr.GetHTMLURL(),
		CreatedAt:   pr.GetCreatedAt().Time,
		UpdatedAt:   pr.GetUpdatedAt().Time,
	}
}

// Reviews lists a pull request's reviews, oldest first, all pages.
func (c *InstallationClient) Reviews(ctx context.Context, fullName string, number int) ([]Review, error) {
	path, err := c.pullPath(fullName, number, "reviews")
	if err != nil {
		return nil, err
	}
	raw, err := list(ctx, c, "GET /"+path, c.app.endpoint(path, url.Values{"per_page": {strconv.Itoa(perPage)}}),
		decodeList[*github.PullRequestReview], nil)
	if err != nil {
		return nil, err
	}
	reviews := make([]Review, 0, len(raw))
	for _, r := range raw {
		if r.GetID() == 0 {
			return nil, incomplete("GET /"+path, "a review has no id")
		}
		author, bot := login(r.User)
		reviews = append(reviews, Review{
			ID:          r.GetID(),
			Author:      author,
			AuthorIsBot: bot,
			State:       r.GetState(),
			Body:        r.GetBody(),
			CommitID:    r.GetCommitID(),
			URL:         r.GetHTMLURL(),
			SubmittedAt: r.GetSubmittedAt().Time,
		})
	}
	return reviews, nil
}

// ReviewComments lists a pull request's review comments, oldest first,
// all pages (GET /repos/{owner}/{repo}/pulls/{number}/comments).
func (c *InstallationClient) ReviewComments(ctx context.Context, fullName string, number int) ([]ReviewComment, error) {
	path, err := c.pullPath(fullName, number, "comments")
	if err != nil {
		return nil, err
	}
	raw, err := list(ctx, c, "GET /"+path, c.app.endpoint(path, url.Values{"per_page": {strconv.Itoa(perPage)}}),
		decodeList[*github.PullRequestComment], nil)
	if err != nil {
		return nil, err
	}
	comments := make([]ReviewComment, 0, len(raw))
	for _, rc := range raw {
		if rc.GetID() == 0 {
			return nil, incomplete("GET /"+path, "a review comment has no id")
		}
		author, bot := login(rc.User)
		comments = append(comments, ReviewComment{
			ID:               rc.GetID(),
			ReviewID:         rc.GetPullRequestReviewID(),
			InReplyTo:        rc.InReplyTo,
			Author:           author,
			AuthorIsBot:      bot,
			Body:             rc.GetBody(),
			Path:             rc.GetPath(),
			DiffHunk:         rc.GetDiffHunk(),
			Line:             rc.Line,
			StartLine:        rc.StartLine,
			OriginalLine:     rc.OriginalLine,
			CommitID:         rc.GetCommitID(),
			OriginalCommitID: rc.GetOriginalCommitID(),
			URL:              rc.GetHTMLURL(),
			Outdated:         rc.Line == nil,
			CreatedAt:        rc.GetCreatedAt().Time,
		})
	}
	return comments, nil
}

// alertStates are listed one by one: the endpoint documents state as a
// filter and has long listed only open alerts without it.
var alertStates = []string{"open", "dismissed", "fixed"}

// CodeScanningAlerts lists the repository's code-scanning alerts in every
// state, all pages, ordered by number. A repository without code scanning
// (GitHub answers 403 "Advanced Security must be enabled…" or 404 "no
// analysis found") has none: it returns nil and no error. Any other 403,
// such as the app lacking the "Code scanning alerts" permission, is an
// error, because it needs an operator.
func (c *InstallationClient) CodeScanningAlerts(ctx context.Context, fullName string) ([]Alert, error) {
	base, err := c.repoPath(fullName)
	if err != nil {
		return nil, err
	}
	path := base + "/code-scanning/alerts"
	byNumber := map[int]Alert{}
	for _, state := range alertStates {
		raw, err := list(ctx, c, "GET /"+path+"?state="+state, c.app.endpoint(path, url.Values{
			"state": {state}, "per_page": {strconv.Itoa(perPage)},
		}), decodeList[*github.Alert], nil)
		if err != nil {
			if codeScanningOff(err) {
				return nil, nil
			}
			return nil, err
		}
		for _, a := range raw {
			al := alert(a)
			if al.Number <= 0 {
				return nil, incomplete("GET /"+path, "an alert has no number")
			}
			// An alert that changes state between two listings appears
			// in both; the later update wins.
			if prev, ok := byNumber[al.Number]; !ok || al.UpdatedAt.After(prev.UpdatedAt) {
				byNumber[al.Number] = al
			}
		}
	}
	alerts := make([]Alert, 0, len(byNumber))
	for _, a := range byNumber {
		alerts = append(alerts, a)
	}
	slices.SortFunc(alerts, func(a, b Alert) int { return a.Number - b.Number })
	return alerts, nil
}

// codeScanningOff recognises GitHub's answers for a repository where code
// scanning is not available or has never run.
func codeScanningOff(err error) bool {
	var se *statusError
	if !errors.As(err, &se) || se.rl != nil {
		return false
	}
	msg := strings.ToLower(se.Message)
	switch se.Status {
	case http.StatusForbidden:
		// "Advanced Security must be enabled for this repository to use
		// code scanning." (also "Code Security must be enabled…"), and
		// "Code scanning is not enabled for this repository."
		return strings.Contains(msg, "must be enabled") || strings.Contains(msg, "not enabled")
	case http.StatusNotFound:
		return strings.Contains(msg, "no analysis found")
	}
	return false
}

func alert(a *github.Alert) Alert {
	rule := a.GetRule()
	severity := rule.GetSecuritySeverityLevel()
	if severity == "" {
		severity = rule.GetSeverity()
	}
	inst := a.GetMostRecentInstance()
	loc := inst.GetLocation()
	return Alert{
		Number:          a.GetNumber(),
		RuleID:          rule.GetID(),
		RuleName:        rule.GetName(),
		RuleDescription: rule.GetDescription(),
		Severity:        severity,
		State:           a.GetState(),
		Tool:            a.GetTool().GetName(),
		Path:            loc.GetPath(),
		StartLine:       loc.GetStartLine(),
		EndLine:         loc.GetEndLine(),
		Message:         inst.GetMessage().GetText(),
		CommitSHA:       inst.GetCommitSHA(),
		URL:             a.GetHTMLURL(),
		CreatedAt:       a.GetCreatedAt().Time,
		UpdatedAt:       a.GetUpdatedAt().Time,
	}
}

// HeadCommit resolves ref (a branch, tag or commit) to its commit id
// (GET /repos/{owner}/{repo}/commits/{ref}). It asks for GitHub's "sha"
// media type, which answers with the id alone instead of the commit with
// its whole diff.
func (c *InstallationClient) HeadCommit(ctx context.Context, fullName, ref string) (string, error) {
	base, err := c.repoPath(fullName)
	if err != nil {
		return "", err
	}
	if ref == "" {
		return "", codelotse.Errorf(codelotse.Invalid, "HeadCommit needs a branch, tag or commit")
	}
	if err := checkRef(ref); err != nil {
		return "", err
	}
	path := base + "/commits/" + ref
	op := "GET /" + path
	_, body, err := c.app.do(ctx, &request{
		op:     op,
		url:    c.app.endpoint(path, nil),
		accept: "application/vnd.github.sha",
		cred:   c,
		limit:  &c.st.limit,
		follow: true,
	})
	if err != nil {
		return "", err
	}
	sha := strings.TrimSpace(string(body))
	if strings.HasPrefix(sha, "{") {
		// A server that ignores the media type sends the commit object.
		var commit struct {
			SHA string `json:"sha"`
		}
		if err := json.Unmarshal(body, &commit); err == nil {
			sha = commit.SHA
		}
	}
	if !objectID(sha) {
		return "", incomplete(op, "the answer is not a commit id")
	}
	return strings.ToLower(sha), nil
}

// list GETs first and every page its Link headers name, decoding each
// with decode. keep, if not nil, ends the listing at the first item it
// rejects (for listings sorted newest first). It fails after a.maxPages
// pages, or when a next link leaves the API or repeats, rather than
// return a silently truncated list.
func list[T any](ctx context.Context, c *InstallationClient, op, first string, decode func([]byte) ([]T, error), keep func(T) bool) ([]T, error) {
	var all []T
	next := first
	seen := map[string]bool{first: true}
	for page := 1; ; page++ {
		pageOp := op
		if page > 1 {
			pageOp = fmt.Sprintf("%s (page %d)", op, page)
		}
		key := strconv.FormatInt(c.id, 10) + " " + next
		etag, cachedLink, cached, _ := c.app.etags.get(key)
		resp, body, err := c.app.do(ctx, &request{op: pageOp, url: next, cred: c, limit: &c.st.limit, follow: true, etag: etag})
		if err != nil {
			return nil, err
		}
		items, err := []T(nil), error(nil)
		if resp.StatusCode == http.StatusNotModified {
			// Unchanged since the last listing: GitHub did not count it.
			body = cached
			if items, err = decode(body); err == nil && resp.Header.Get("Link") == "" {
				// A 304 need not repeat the Link header. The cached one
				// is right unless the page was full and a new page has
				// appeared after it; only then is the page asked again.
				h := http.Header{}
				h.Set("Link", cachedLink)
				if len(items) >= perPage && nextLink(h) == "" {
					resp, body, err = c.app.do(ctx, &request{op: pageOp, url: next, cred: c, limit: &c.st.limit, follow: true})
					if err != nil {
						return nil, err
					}
					c.app.etags.put(key, resp.Header, body)
					items, err = decode(body)
				} else if cachedLink != "" {
					resp.Header.Set("Link", cachedLink)
				}
			}
		} else {
			c.app.etags.put(key, resp.Header, body)
			items, err = decode(body)
		}
		if err != nil {
			return nil, codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: cannot decode the answer: %w", pageOp, err),
				"GitHub returned an answer CodeLotse cannot read; try again in a moment")
		}
		for _, it := range items {
			if keep != nil && !keep(it) {
				return all, nil
			}
			all = append(all, it)
		}
		link := nextLink(resp.Header)
		if link == "" {
			return all, nil
		}
		if page >= c.app.maxPages {
			return nil, codelotse.Wrap(codelotse.Unavailable,
				fmt.Errorf("githubapp: %s: more than %d pages; stopped rather than keep a partial list", op, c.app.maxPages),
				fmt.Sprintf("GitHub returned more than %d pages; CodeLotse does not sync a partial list", c.app.maxPages))
		}
		cur, _ := url.Parse(next)
		u, err := cur.Parse(link)
		if err != nil || !sameOrigin(u, c.app.apiURL) || !strings.HasPrefix(u.Path, c.app.apiURL.Path) || u.User != nil {
			return nil, codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: the next-page link leaves the API", pageOp),
				"GitHub returned an inconsistent list; try again in a moment")
		}
		next = u.String()
		if seen[next] {
			return nil, codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: the next-page link repeats an earlier page", pageOp),
				"GitHub returned an inconsistent list; try again in a moment")
		}
		seen[next] = true
	}
}

func decodeList[T any](body []byte) ([]T, error) {
	var items []T
	err := json.Unmarshal(body, &items)
	return items, err
}

// endpoint is the API URL of path (unescaped, relative to the API root)
// with query q.
func (a *App) endpoint(path string, q url.Values) string {
	u := a.apiURL.ResolveReference(&url.URL{Path: path})
	u.RawQuery = q.Encode()
	return u.String()
}

// repoPath checks an "owner/name" and returns "repos/owner/name". Names
// are checked, not escaped: a name is joined into request paths, and one
// with a slash or a dot segment would address a different endpoint.
func (c *InstallationClient) repoPath(fullName string) (string, error) {
	if err := c.valid(); err != nil {
		return "", err
	}
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || !repoNamePart(owner) || !repoNamePart(name) {
		return "", codelotse.Errorf(codelotse.Invalid, "%q is not a repository name of the form owner/name", fullName)
	}
	return "repos/" + owner + "/" + name, nil
}

func (c *InstallationClient) pullPath(fullName string, number int, what string) (string, error) {
	base, err := c.repoPath(fullName)
	if err != nil {
		return "", err
	}
	if number <= 0 {
		return "", codelotse.Errorf(codelotse.Invalid, "pull request number %d is not valid", number)
	}
	return base + "/pulls/" + strconv.Itoa(number) + "/" + what, nil
}

// repoNamePart accepts what GitHub allows in owner and repository names:
// letters, digits, '-', '_' and '.', but not "." or "..".
func repoNamePart(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// checkRef refuses what git forbids in ref names and would change the
// request path: empty or dot segments, and control characters. Other
// characters are escaped when the URL is built.
func checkRef(ref string) error {
	for _, seg := range strings.Split(ref, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return codelotse.Errorf(codelotse.Invalid, "%q is not a valid git ref", ref)
		}
	}
	for _, r := range ref {
		if r < 0x20 || r == 0x7f {
			return codelotse.Errorf(codelotse.Invalid, "git ref %q contains a control character", ref)
		}
	}
	return nil
}

// objectID reports whether s is a full git object id (SHA-1 or SHA-256).
func objectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// login is a user's login and whether the account is a bot; GitHub shows a
// deleted account as null or as "ghost".
func login(u *github.User) (string, bool) {
	if u.GetLogin() == "" {
		return "ghost", false
	}
	return u.GetLogin(), u.GetType() == "Bot"
}

func incomplete(op, what string) error {
	return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: %s", op, what),
		"GitHub returned incomplete data; try again in a moment")
}
