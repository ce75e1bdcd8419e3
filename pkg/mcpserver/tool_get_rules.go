package mcpserver

import (
	"context"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/shape"
)

var getRules = newTool("get_rules", "Get review rules",
	"Returns the review rules in force: the tenant's rules, plus the rules of one repository when you pass repository (key, title, severity, scope, path globs and instructions). "+
		"Call it before changing code in a repository, and use the rule keys to read findings.",
	runGetRules)

type getRulesArgs struct {
	Repository repoRef `json:"repository" desc:"Repository id or full name (owner/name); omit for tenant-wide rules only."`
}

type ruleOut struct {
	Key          string   `json:"key"`
	Title        string   `json:"title"`
	Severity     string   `json:"severity"`
	Scope        string   `json:"scope"`
	PathGlobs    []string `json:"path_globs"`
	Instructions string   `json:"instructions"`
}

func runGetRules(ctx context.Context, s *session, in getRulesArgs) (shape.Doc, error) {
	ref, given, err := repositoryArg(in.Repository)
	if err != nil {
		return shape.Doc{}, err
	}
	var repoID *int64
	var repoHead any
	if given {
		r, err := s.deps.DB.Tenant(s.principal.TenantID).ResolveRepository(ctx, s.filter(), ref)
		if err != nil {
			return shape.Doc{}, err
		}
		repoID = &r.ID
		repoHead = map[string]any{"id": r.ID, "full_name": r.FullName}
	}
	rules, err := s.deps.DB.Tenant(s.principal.TenantID).RulesInForce(ctx, repoID)
	if err != nil {
		return shape.Doc{}, err
	}
	items := make([]any, len(rules))
	for i, r := range rules {
		items[i] = ruleItem(r)
	}
	return shape.Doc{
		Head:    []shape.Field{{Key: "repository", Value: repoHead}},
		ListKey: "rules",
		Items:   items,
	}, nil
}

// ruleItem is how a rule appears in every tool result.
func ruleItem(r codelotse.Rule) ruleOut {
	scope := "tenant"
	if r.RepositoryID != nil {
		scope = "repository:" + r.RepoFullName
	}
	globs := r.PathGlobs
	if globs == nil {
		globs = []string{}
	}
	return ruleOut{Key: r.Key, Title: r.Title, Severity: string(r.Severity), Scope: scope, PathGlobs: globs, Instructions: r.Instructions}
}
