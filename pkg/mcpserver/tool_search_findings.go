package mcpserver

import (
	"context"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/shape"
)

var searchFindings = newTool("search_findings", "Search findings",
	"Searches review findings across the repositories you can view, newest first, filtered by text, repository, minimum severity, status (open by default), rule, path prefix or pull request. "+
		"Pass next_cursor back as cursor to page. "+
		"Call get_pull_request_review for a finding's full review, or get_fix_prompt to work on them.",
	runSearchFindings)

type searchFindingsArgs struct {
	Query       string  `json:"query" schema:"maxLength=500" desc:"Text to find in the title, body, rule or path (case-insensitive)."`
	Repository  repoRef `json:"repository" desc:"Repository id or full name (owner/name)."`
	Severity    string  `json:"severity" schema:"enum=info|low|medium|high|critical" desc:"Minimum severity."`
	Status      string  `json:"status" schema:"enum=open|resolved|dismissed|all,default=open"`
	Rule        string  `json:"rule" desc:"Exact rule key."`
	Path        string  `json:"path" desc:"Path prefix, e.g. pkg/ or pkg/db/store.go."`
	PullRequest *int    `json:"pull_request" schema:"minimum=1" desc:"Pull request number (needs repository)."`
	Limit       int     `json:"limit" schema:"minimum=1,maximum=100,default=20,clamp" desc:"At most this many findings (1-100, default 20)."`
	Cursor      string  `json:"cursor" desc:"next_cursor from a previous search_findings result with the same filters."`
}

// searchFindingsPos is the last finding shown, by id only.
type searchFindingsPos struct {
	ID int64 `json:"i"`
}

func runSearchFindings(ctx context.Context, s *session, in searchFindingsArgs) (shape.Doc, error) {
	f := postgres.FindingFilter{Repos: s.filter(), Query: in.Query, Rule: in.Rule, PathPrefix: trimPath(in.Path), Limit: in.Limit + 1}
	if in.Severity != "" {
		// The schema's enum lists exactly the severities ParseSeverity reads.
		sev, err := codelotse.ParseSeverity(in.Severity)
		if err != nil {
			return shape.Doc{}, err
		}
		f.MinSeverity = sev
	}
	// "all" is the only status that is not a finding's status.
	f.Status = in.Status
	if in.Status == "all" {
		f.Status = ""
	}
	ref, given, err := repositoryArg(in.Repository)
	if err != nil {
		return shape.Doc{}, err
	}
	if in.PullRequest != nil {
		if !given {
			return shape.Doc{}, codelotse.Errorf(codelotse.Invalid, "pull_request needs repository: pull request numbers are per repository.")
		}
		f.PRNumber = in.PullRequest
	}
	if given {
		r, err := s.deps.DB.Tenant(s.principal.TenantID).ResolveRepository(ctx, s.filter(), ref)
		if err != nil {
			return shape.Doc{}, err
		}
		f.RepoID = &r.ID
	}
	hash := argsHash(in.Query, string(in.Repository), in.Severity, f.Status, in.Rule, in.Path, optional(in.PullRequest))
	if in.Cursor != "" {
		var pos searchFindingsPos
		if err := s.decodeCursor("search_findings", hash, in.Cursor, &pos); err != nil {
			return shape.Doc{}, err
		}
		f.AfterID = pos.ID
	}
	found, err := s.deps.DB.Tenant(s.principal.TenantID).SearchFindings(ctx, f)
	if err != nil {
		return shape.Doc{}, err
	}
	limit := f.Limit - 1
	more := len(found) > limit
	if more {
		found = found[:limit]
	}
	items := make([]any, len(found))
	for i, x := range found {
		items[i] = findingItem(x, true)
	}
	cursorAt := func(i int) any {
		return s.encodeCursor("search_findings", hash, searchFindingsPos{ID: found[i].ID})
	}
	doc := shape.Doc{ListKey: "findings", Items: items, Cursor: cursorAt}
	if more {
		doc.NextCursor = cursorAt(len(found) - 1)
	}
	return doc, nil
}
