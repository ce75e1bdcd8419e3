package mcpserver

import (
	"fmt"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// findingOut is how a finding appears in every tool result.
type findingOut struct {
	ID          int64  `json:"id"`
	Repository  string `json:"repository,omitempty"`
	PullRequest *int   `json:"pull_request,omitempty"`
	Rule        string `json:"rule"`
	Severity    string `json:"severity"`
	Status      string `json:"status"`
	Path        string `json:"path"`
	StartLine   *int   `json:"start_line"`
	EndLine     *int   `json:"end_line"`
	Title       string `json:"title"`
	Body        string `json:"body"`
	Suggestion  string `json:"suggestion,omitempty"`
	Commit      string `json:"commit,omitempty"`
	CreatedAt   string `json:"created_at,omitempty"`
	ReviewID    *int64 `json:"review_id,omitempty"`
	// Set only when the finding's commit is not the indexed one.
	IndexedCommit string `json:"indexed_commit,omitempty"`
	LocationNote  string `json:"location_note,omitempty"`
}

// movedNote tells an agent that a finding's lines were reported on another
// commit than the one search_code and get_file_contents read.
const movedNote = "This finding was reported on commit %s; the code index (search_code, get_file_contents) is at %s. The lines may have moved: find the code the finding describes before changing anything."

// findingItem renders a finding; withContext adds repository, pull request,
// review and time (search results span repositories).
func findingItem(f codelotse.Finding, withContext bool) findingOut {
	o := findingOut{ID: f.ID, Rule: f.RuleKey, Severity: string(f.Severity), Status: f.Status, Path: f.Path,
		StartLine: f.StartLine, EndLine: f.EndLine, Title: f.Title, Body: f.Body, Suggestion: f.Suggestion}
	if withContext {
		o.Repository, o.PullRequest, o.ReviewID, o.Commit = f.RepoFullName, f.PRNumber, f.ReviewID, f.CommitSHA
		o.CreatedAt = f.CreatedAt.UTC().Format(time.RFC3339)
	}
	if f.CommitSHA != "" && f.RepoIndexedCommit != "" && f.CommitSHA != f.RepoIndexedCommit {
		o.Commit, o.IndexedCommit = f.CommitSHA, f.RepoIndexedCommit
		o.LocationNote = fmt.Sprintf(movedNote, f.CommitSHA, f.RepoIndexedCommit)
	}
	return o
}

// severityCounts counts findings by severity, every severity present.
func severityCounts(fs []codelotse.Finding) map[string]int {
	c := map[string]int{}
	for _, s := range codelotse.Severities {
		c[string(s)] = 0
	}
	for _, f := range fs {
		c[string(f.Severity)]++
	}
	return c
}
