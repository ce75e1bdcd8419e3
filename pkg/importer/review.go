package importer

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// ReviewSchema is the value of "schema" in a native review document.
const ReviewSchema = "codelotse.review/v1"

// reviewDoc is the native review JSON (docs/review-format.md).
type reviewDoc struct {
	Schema      string       `json:"schema"`
	Repository  string       `json:"repository"`
	PullRequest *prDoc       `json:"pull_request"`
	Review      *reviewBody  `json:"review"`
	Findings    []findingDoc `json:"findings"`
}

type prDoc struct {
	Number  int    `json:"number"`
	Title   string `json:"title"`
	Author  string `json:"author"`
	State   string `json:"state"`
	Base    string `json:"base"`
	Head    string `json:"head"`
	HeadSHA string `json:"head_sha"`
	URL     string `json:"url"`
}

type reviewBody struct {
	ID        string `json:"id"`
	Commit    string `json:"commit"`
	Status    string `json:"status"`
	Summary   string `json:"summary"`
	Author    string `json:"author"`
	CreatedAt string `json:"created_at"`
}

type findingDoc struct {
	Rule        string `json:"rule"`
	Severity    string `json:"severity"`
	Status      string `json:"status"`
	Path        string `json:"path"`
	StartLine   *int   `json:"start_line"`
	EndLine     *int   `json:"end_line"`
	Title       string `json:"title"`
	Body        string `json:"body"`
	Suggestion  string `json:"suggestion"`
	Fingerprint string `json:"fingerprint"`
}

var (
	fullNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)
	shaRE      = regexp.MustCompile(`^[0-9a-f]{7,64}$`)
)

// MaxFindings bounds one import.
const MaxFindings = 50000

// ParseReview reads a native review document.
func ParseReview(data []byte) (codelotse.ReviewImport, error) {
	var d reviewDoc
	var out codelotse.ReviewImport
	if err := decodeStrict(data, &d, true); err != nil {
		return out, err
	}
	if d.Schema != ReviewSchema {
		return out, invalidf("/schema", "must be %q", ReviewSchema)
	}
	if !fullNameRE.MatchString(d.Repository) {
		return out, invalidf("/repository", "must be OWNER/NAME, not %q", d.Repository)
	}
	out.Repository = d.Repository
	out.Source = "review-json"
	if d.PullRequest == nil {
		return out, invalidf("/pull_request", "is required")
	}
	p := d.PullRequest
	if p.Number < 1 {
		return out, invalidf("/pull_request/number", "must be a positive number")
	}
	if p.Number > maxNumber {
		return out, invalidf("/pull_request/number", "must be at most %d", maxNumber)
	}
	state := p.State
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "merged" {
		return out, invalidf("/pull_request/state", "must be open, closed or merged, not %q", p.State)
	}
	if p.HeadSHA != "" && !shaRE.MatchString(p.HeadSHA) {
		return out, invalidf("/pull_request/head_sha", "must be a lowercase hex commit id")
	}
	if len(p.Title) > 1000 {
		return out, invalidf("/pull_request/title", "is longer than 1000 bytes")
	}
	out.PullRequest = &codelotse.PullRequest{Number: p.Number, Title: p.Title, Author: p.Author, State: state,
		BaseRef: p.Base, HeadRef: p.Head, HeadSHA: p.HeadSHA, URL: p.URL}

	if d.Review == nil {
		return out, invalidf("/review", "is required")
	}
	r := d.Review
	if strings.TrimSpace(r.ID) == "" || len(r.ID) > 200 {
		return out, invalidf("/review/id", "is required (1-200 characters): it makes re-imports idempotent")
	}
	if r.Commit != "" && !shaRE.MatchString(r.Commit) {
		return out, invalidf("/review/commit", "must be a lowercase hex commit id")
	}
	status := r.Status
	if status == "" {
		status = "completed"
	}
	out.Review = codelotse.Review{ExternalID: r.ID, CommitSHA: r.Commit, Status: status, Summary: r.Summary, Author: r.Author}
	if r.Commit == "" {
		out.Review.CommitSHA = p.HeadSHA
	}
	if r.CreatedAt != "" {
		t, err := time.Parse(time.RFC3339, r.CreatedAt)
		if err != nil {
			return out, invalidf("/review/created_at", "must be an RFC 3339 time such as 2026-11-30T12:00:00Z")
		}
		out.Review.CreatedAt = t
	}

	if len(d.Findings) > MaxFindings {
		return out, invalidf("/findings", "has %d findings; at most %d per import", len(d.Findings), MaxFindings)
	}
	seen := map[string]int{}
	for i, f := range d.Findings {
		ptr := fmt.Sprintf("/findings/%d", i)
		fd, err := finding(ptr, f)
		if err != nil {
			return out, err
		}
		if j, dup := seen[fd.Fingerprint]; dup {
			return out, invalidf(ptr+"/fingerprint", "duplicates /findings/%d; give each finding a distinct fingerprint (or rule, path, lines and title)", j)
		}
		seen[fd.Fingerprint] = i
		// Like SARIF findings, each finding carries the commit that was
		// reviewed and the importer it came from.
		fd.CommitSHA = out.Review.CommitSHA
		fd.Source = out.Source
		out.Findings = append(out.Findings, fd)
	}
	return out, nil
}

func finding(ptr string, f findingDoc) (codelotse.Finding, error) {
	var out codelotse.Finding
	sev, err := codelotse.ParseSeverity(f.Severity)
	if err != nil {
		return out, invalidf(ptr+"/severity", "must be one of info, low, medium, high, critical, not %q", f.Severity)
	}
	status := f.Status
	if status == "" {
		status = codelotse.StatusOpen
	}
	if status != codelotse.StatusOpen && status != codelotse.StatusResolved && status != codelotse.StatusDismissed {
		return out, invalidf(ptr+"/status", "must be open, resolved or dismissed, not %q", f.Status)
	}
	if strings.TrimSpace(f.Title) == "" {
		return out, invalidf(ptr+"/title", "is required")
	}
	if strings.ContainsAny(f.Title, "\r\n\u0085\u2028\u2029") {
		return out, invalidf(ptr+"/title", "must be one line (put the details in body)")
	}
	if len(f.Title) > 1000 {
		return out, invalidf(ptr+"/title", "is longer than 1000 bytes")
	}
	if len(f.Rule) > 200 {
		return out, invalidf(ptr+"/rule", "is longer than 200 characters")
	}
	if err := checkLines(ptr, f.StartLine, f.EndLine); err != nil {
		return out, err
	}
	path, err := cleanPath(ptr+"/path", f.Path)
	if err != nil {
		return out, err
	}
	if len(f.Fingerprint) > 200 {
		return out, invalidf(ptr+"/fingerprint", "is longer than 200 characters")
	}
	out = codelotse.Finding{RuleKey: f.Rule, Severity: sev, Status: status, Path: path, StartLine: f.StartLine, EndLine: f.EndLine,
		Title: f.Title, Body: f.Body, Suggestion: f.Suggestion, Fingerprint: f.Fingerprint}
	if out.EndLine == nil && out.StartLine != nil {
		out.EndLine = out.StartLine
	}
	if out.Fingerprint == "" {
		out.Fingerprint = Fingerprint(f.Rule, path, out.StartLine, out.EndLine, f.Title)
	}
	return out, nil
}
