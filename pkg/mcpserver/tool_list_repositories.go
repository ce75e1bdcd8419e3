package mcpserver

import (
	"context"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/shape"
)

var listRepositories = newTool("list_repositories", "List repositories",
	"Lists the repositories you can view in this CodeLotse tenant, with id, full name, default branch, indexed commit and open review count, and where your access comes from. "+
		"Pass next_cursor back as cursor to page. "+
		"Use a repository's full_name or id as the repository argument of get_rules and the other tools.",
	runListRepositories)

type listRepositoriesArgs struct {
	Query  string `json:"query" desc:"Only repositories whose full name (owner/name) contains this text, case-insensitive."`
	Limit  int    `json:"limit" schema:"minimum=1,maximum=100,default=30,clamp" desc:"At most this many repositories (1-100, default 30)."`
	Cursor string `json:"cursor" desc:"next_cursor from a previous list_repositories result with the same query."`
}

// listReposPos is the last repository shown, by id only: the page after
// it is found by that repository's name in the database, so the cursor
// carries no name.
type listReposPos struct {
	ID int64 `json:"i"`
}

type repoOut struct {
	ID            int64   `json:"id"`
	FullName      string  `json:"full_name"`
	DefaultBranch string  `json:"default_branch"`
	Private       bool    `json:"private"`
	URL           string  `json:"url"`
	IndexedCommit *string `json:"indexed_commit"`
	IndexedAt     *string `json:"indexed_at"`
	OpenReviews   int     `json:"open_reviews"`
}

func runListRepositories(ctx context.Context, s *session, in listRepositoriesArgs) (shape.Doc, error) {
	limit := in.Limit
	var pos listReposPos
	bind := argsHash(in.Query)
	if in.Cursor != "" {
		if err := s.decodeCursor("list_repositories", bind, in.Cursor, &pos); err != nil {
			return shape.Doc{}, err
		}
	}
	repos, err := s.deps.DB.Tenant(s.principal.TenantID).ListRepositories(ctx, s.filter(), in.Query, pos.ID, limit+1)
	if err != nil {
		return shape.Doc{}, err
	}
	more := len(repos) > limit
	if more {
		repos = repos[:limit]
	}
	items := make([]any, len(repos))
	for i, r := range repos {
		o := repoOut{ID: r.ID, FullName: r.FullName, DefaultBranch: r.DefaultBranch, Private: r.Private, URL: r.URL, OpenReviews: r.OpenReviews}
		if r.IndexedCommit != "" {
			o.IndexedCommit = &r.IndexedCommit
		}
		if r.IndexedAt != nil {
			at := r.IndexedAt.UTC().Format(time.RFC3339)
			o.IndexedAt = &at
		}
		items[i] = o
	}
	cursorAt := func(i int) any {
		return s.encodeCursor("list_repositories", bind, listReposPos{ID: repos[i].ID})
	}
	doc := shape.Doc{
		Head:    []shape.Field{{Key: "access", Value: s.access()}},
		ListKey: "repositories",
		Items:   items,
		Cursor:  cursorAt,
	}
	if more {
		doc.NextCursor = cursorAt(len(repos) - 1)
	}
	return doc, nil
}

// access describes where the session's grants come from, so an agent can
// tell its user why a repository is missing or when to sign in again.
func (s *session) access() map[string]any {
	a := map[string]any{"source": s.grants.Source, "all_repositories": s.grants.Admin}
	switch s.grants.Source {
	case "github":
		a["refreshed_at"] = s.grants.AsOf.UTC().Format(time.RFC3339)
		a["age_seconds"] = int(time.Since(s.grants.AsOf).Seconds())
		a["expires_at"] = s.grants.AsOf.Add(codelotse.GrantMaxAge).UTC().Format(time.RFC3339)
		a["note"] = "Access follows your GitHub memberships as of refreshed_at (CodeLotse refreshes them from the GitHub App installation, and at each sign-in); it lapses 24 hours after the last refresh."
	case codelotse.MembershipLocal:
		a["granted_at"] = s.grants.AsOf.UTC().Format(time.RFC3339)
		a["note"] = "Access was granted by an operator of CodeLotse (not cached from GitHub); it lasts until they change it."
	case "oidc":
		a["groups"] = s.grants.Groups
		a["note"] = "Access follows the identity-provider groups of the session that created this token and the tenant's current group mappings."
	}
	return a
}
