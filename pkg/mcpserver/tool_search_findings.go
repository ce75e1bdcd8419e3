package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/shape"
)

var searchFindings = tool{
	name:  "search_findings",
	title: "Search findings",
	description: "Searches review findings across the repositories you can view, newest first, filtered by text, repository, minimum severity, status (open by default), rule, path prefix or pull request. " +
		"Pass next_cursor back as cursor to page. " +
		"Call get_pull_request_review for a finding's full review, or get_fix_prompt to work on them.",
	schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "maxLength": 500, "description": "Text to find in the title, body, rule or path (case-insensitive)."},
    "repository": {"type": ["string", "integer"], "description": "Repository id or full name (owner/name)."},
    "severity": {"type": "string", "enum": ["info", "low", "medium", "high", "critical"], "description": "Minimum severity."},
    "status": {"type": "string", "enum": ["open", "resolved", "dismissed", "all"], "default": "open"},
    "rule": {"type": "string", "description": "Exact rule key."},
    "path": {"type": "string", "description": "Path prefix, e.g. pkg/ or pkg/db/store.go."},
    "pull_request": {"type": "integer", "minimum": 1, "description": "Pull request number (needs repository)."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20, "description": "At most this many findings (1-100, default 20)."},
    "cursor": {"type": "string", "description": "next_cursor from a previous search_findings result with the same filters."}
  },
  "additionalProperties": false
}`),
	run: runSearchFindings,
}

// searchFindingsPos is the last finding shown, by id only.
type searchFindingsPos struct {
	ID int64 `json:"i"`
}

func runSearchFindings(ctx context.Context, s *session, raw json.RawMessage) (shape.Doc, error) {
	var in struct {
		Query       string          `json:"query"`
		Repository  json.RawMessage `json:"repository"`
		Severity    string          `json:"severity"`
		Status      string          `json:"status"`
		Rule        string          `json:"rule"`
		Path        string          `json:"path"`
		PullRequest *int            `json:"pull_request"`
		Limit       *int            `json:"limit"`
		Cursor      string          `json:"cursor"`
	}
	if err := decodeArgs(raw, &in); err != nil {
		return shape.Doc{}, err
	}
	f := postgres.FindingFilter{Repos: s.filter(), Query: in.Query, Rule: in.Rule, PathPrefix: trimPath(in.Path), Limit: clamp(in.Limit, 1, 100, 20) + 1}
	if len(in.Query) > 500 {
		return shape.Doc{}, codelotse.Errorf(codelotse.Invalid, "query is longer than 500 characters.")
	}
	if in.Severity != "" {
		sev, err := codelotse.ParseSeverity(in.Severity)
		if err != nil {
			return shape.Doc{}, codelotse.Errorf(codelotse.Invalid, "severity must be one of info, low, medium, high, critical.")
		}
		f.MinSeverity = sev
	}
	switch in.Status {
	case "", codelotse.StatusOpen:
		f.Status = codelotse.StatusOpen
	case codelotse.StatusResolved, codelotse.StatusDismissed:
		f.Status = in.Status
	case "all":
		f.Status = ""
	default:
		return shape.Doc{}, codelotse.Errorf(codelotse.Invalid, "status must be open, resolved, dismissed or all.")
	}
	ref, given, err := repositoryArg(in.Repository)
	if err != nil {
		return shape.Doc{}, err
	}
	if in.PullRequest != nil {
		if !given {
			return shape.Doc{}, codelotse.Errorf(codelotse.Invalid, "pull_request needs repository: pull request numbers are per repository.")
		}
		if *in.PullRequest < 1 {
			return shape.Doc{}, codelotse.Errorf(codelotse.Invalid, "pull_request must be a positive number.")
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
	hash := argsHash(in.Query, string(in.Repository), in.Severity, f.Status, in.Rule, in.Path, in.PullRequest)
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
