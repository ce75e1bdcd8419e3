package mcpserver

import (
	"context"
	"time"

	"github.com/codelotse/codelotse/pkg/shape"
)

var getPullRequestReview = newTool("get_pull_request_review", "Get a pull request review",
	"Returns a pull request (number, title, author, state, branches, head commit, url), one of its reviews (the latest unless review_id is given, with summary and counts by severity) and that review's findings with rule, severity, status, location, body and suggestion. "+
		"Call get_fix_prompt to work on the findings, or get_file_contents to read the code they point at.",
	runGetPullRequestReview)

type getPullRequestReviewArgs struct {
	Repository repoRef `json:"repository" schema:"required" desc:"Repository id or full name (owner/name)."`
	Number     *int    `json:"number" schema:"required,minimum=1" desc:"Pull request number."`
	ReviewID   *int64  `json:"review_id" schema:"minimum=1" desc:"A review id from other_review_ids; default: the latest review."`
}

func runGetPullRequestReview(ctx context.Context, s *session, in getPullRequestReviewArgs) (shape.Doc, error) {
	r, err := s.requiredRepo(ctx, in.Repository)
	if err != nil {
		return shape.Doc{}, err
	}
	d, err := s.deps.DB.Tenant(s.principal.TenantID).GetReview(ctx, r.ID, *in.Number, in.ReviewID)
	if err != nil {
		return shape.Doc{}, err
	}
	p := d.PullRequest
	others := []int64{}
	for _, id := range d.Reviews {
		if id != d.Review.ID {
			others = append(others, id)
		}
	}
	items := make([]any, len(d.Findings))
	for i, f := range d.Findings {
		items[i] = findingItem(f, false)
	}
	lines, err := s.lineCommits(ctx, r, p.Number, d.Findings, d.Review.CommitSHA)
	if err != nil {
		return shape.Doc{}, err
	}
	return shape.Doc{
		Head: []shape.Field{
			{Key: "repository", Value: r.FullName},
			{Key: "pull_request", Value: struct {
				Number  int    `json:"number"`
				Title   string `json:"title"`
				Author  string `json:"author"`
				State   string `json:"state"`
				Base    string `json:"base"`
				Head    string `json:"head"`
				HeadSHA string `json:"head_sha"`
				URL     string `json:"url"`
			}{p.Number, p.Title, p.Author, p.State, p.BaseRef, p.HeadRef, p.HeadSHA, p.URL}},
			{Key: "review", Value: struct {
				ID             int64          `json:"id"`
				CreatedAt      string         `json:"created_at"`
				Commit         string         `json:"commit"`
				Status         string         `json:"status"`
				Author         string         `json:"author"`
				Summary        string         `json:"summary"`
				Counts         map[string]int `json:"counts_by_severity"`
				Total          int            `json:"total_findings"`
				OtherReviewIDs []int64        `json:"other_review_ids"`
			}{d.Review.ID, d.Review.CreatedAt.UTC().Format(time.RFC3339), d.Review.CommitSHA, d.Review.Status, d.Review.Author,
				d.Review.Summary, severityCounts(d.Findings), len(d.Findings), others}},
			{Key: "line_numbers", Value: lines},
		},
		ListKey: "findings",
		Items:   items,
	}, nil
}
