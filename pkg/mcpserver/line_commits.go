package mcpserver

import (
	"context"
	"slices"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// lineCommits says which commits the line numbers of findings refer to,
// and for each whether the code index holds it and how to read it there:
// at the pull request's indexed head (get_file_contents and search_code
// with pull_request), at the repository's indexed commit (without), or
// not at all (then the lines may have moved in the indexed code).
func (s *session) lineCommits(ctx context.Context, r codelotse.Repository, number int, findings []codelotse.Finding, reviewCommit string) (map[string]any, error) {
	var commits []string
	for _, f := range findings {
		if f.CommitSHA != "" && !slices.Contains(commits, f.CommitSHA) {
			commits = append(commits, f.CommitSHA)
		}
	}
	if len(commits) == 0 && reviewCommit != "" {
		commits = append(commits, reviewCommit)
	}
	h, ok, err := s.deps.DB.Tenant(s.principal.TenantID).PullHead(ctx, r.ID, number)
	if err != nil {
		return nil, err
	}
	index := map[string]string{}
	for _, c := range commits {
		switch {
		case ok && c == h.HeadSHA:
			index[c] = "pull_request_head"
		case c == r.IndexedCommit:
			index[c] = "indexed_commit"
		default:
			index[c] = "not_indexed"
		}
	}
	out := map[string]any{"commits": commits, "index": index}
	if ok {
		out["indexed_head"] = h.HeadSHA
	}
	return out, nil
}
