package mcpserver

import (
	"context"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/shape"
)

var searchCode = newTool("search_code", "Search code",
	"Searches the code index (the indexed commit of each repository you can view, or a pull request's head) line by line for a literal or an RE2 regular expression, and returns matching lines with numbered context. "+
		"Pass next_cursor back as cursor to page. "+
		"Call get_file_contents with a match's repository and path to read more of the file.",
	runSearchCode)

// searchCodeArgs are search_code's arguments; context's maximum is
// codeindex.MaxContext (TestArgumentBoundsMatchTheEngines checks it).
type searchCodeArgs struct {
	Query         string  `json:"query" schema:"required,minLength=1,maxLength=1000" desc:"Text to find on one line; a literal unless regex is true."`
	Repository    repoRef `json:"repository" desc:"Repository id or full name (owner/name); omit to search every repository you can view."`
	Path          string  `json:"path" desc:"Only files under this path prefix (e.g. pkg/) or matching this glob (e.g. **/*_test.go)."`
	Regex         bool    `json:"regex" schema:"default=false" desc:"Treat query as an RE2 regular expression. A regex without a literal of 3+ characters needs repository or path."`
	CaseSensitive bool    `json:"case_sensitive" schema:"default=false"`
	Limit         int     `json:"limit" schema:"minimum=1,maximum=100,default=20,clamp" desc:"At most this many matches (1-100, default 20)."`
	Context       int     `json:"context" schema:"minimum=0,maximum=5,default=2,clamp" desc:"Lines of context before and after each match (0-5, default 2)."`
	PullRequest   *int    `json:"pull_request" schema:"minimum=1" desc:"Search the code at this pull request's head instead (needs repository)."`
	Cursor        string  `json:"cursor" desc:"next_cursor from a previous search_code result with the same arguments."`
}

// searchCodePos is the cursor of search_code: the last match shown (a
// chunk id and a line number), or the chunk to continue at (line 0).
type searchCodePos struct {
	Chunk int64 `json:"c"`
	Line  int   `json:"l"`
	// Phase of a pull-request search: 1 its changed files, 2 the base
	// index beneath them (0 outside pull-request searches).
	Phase int `json:"p,omitempty"`
}

type codeMatch struct {
	Repository string `json:"repository"`
	Commit     string `json:"commit"`
	Path       string `json:"path"`
	Line       int    `json:"line"`
	Text       string `json:"text"`
	Snippet    string `json:"snippet,omitempty"`
	pos        searchCodePos
}

func runSearchCode(ctx context.Context, s *session, in searchCodeArgs) (shape.Doc, error) {
	limit := in.Limit
	ctxLines := in.Context
	plan, err := codeindex.NewPlan(in.Query, in.Regex, in.CaseSensitive)
	if err != nil {
		return shape.Doc{}, err
	}
	pf, err := codeindex.NewPathFilter(in.Path)
	if err != nil {
		return shape.Doc{}, err
	}
	ref, given, err := repositoryArg(in.Repository)
	if err != nil {
		return shape.Doc{}, err
	}
	if !plan.Scoped() && !given && in.Path == "" {
		return shape.Doc{}, codelotse.Errorf(codelotse.Invalid,
			"This query has no literal of %d or more characters to search the index with; add repository or path to scope it, or use a longer literal.", codeindex.MinLiteral)
	}
	if in.PullRequest != nil && !given {
		return shape.Doc{}, codelotse.Errorf(codelotse.Invalid, "pull_request needs repository: name the repository the pull request belongs to.")
	}
	var repoIDs []int64
	var pull *postgres.PullCodeHead
	if given {
		r, err := s.deps.DB.Tenant(s.principal.TenantID).ResolveRepository(ctx, s.filter(), ref)
		if err != nil {
			return shape.Doc{}, err
		}
		if r.IndexedCommit == "" {
			return shape.Doc{}, codelotse.Errorf(codelotse.NotFound, "Repository %s has no code index yet.", r.FullName)
		}
		repoIDs = []int64{r.ID}
		if in.PullRequest != nil {
			h, ok, err := s.deps.DB.Tenant(s.principal.TenantID).PullHead(ctx, r.ID, *in.PullRequest)
			if err != nil {
				return shape.Doc{}, err
			}
			if !ok {
				return shape.Doc{}, codelotse.Errorf(codelotse.NotFound, "Pull request #%d of %s has no index of its head: it is not open, or not indexed yet. Search without pull_request to search %s's indexed commit.", *in.PullRequest, r.FullName, r.FullName)
			}
			pull = &h
		}
	} else {
		repoIDs, err = s.deps.DB.Tenant(s.principal.TenantID).IndexedRepositoryIDs(ctx, s.filter())
		if err != nil {
			return shape.Doc{}, err
		}
		if len(repoIDs) == 0 {
			return shape.Doc{}, codelotse.Errorf(codelotse.NotFound, "No repository you can view has a code index yet.")
		}
	}

	pr := 0
	if in.PullRequest != nil {
		pr = *in.PullRequest
	}
	hash := argsHash(in.Query, string(in.Repository), in.Path, in.Regex, in.CaseSensitive, pr)
	var pos searchCodePos
	if in.Cursor != "" {
		if err := s.decodeCursor("search_code", hash, in.Cursor, &pos); err != nil {
			return shape.Doc{}, err
		}
	}

	redactions := map[string]int{}
	res, err := codeindex.Searcher{}.Search(ctx, codeSource{s: s, repoIDs: repoIDs, pull: pull, patterns: plan.LikePatterns(), regex: plan.Regex, prefix: pf.Prefix},
		codeindex.Query{Plan: plan, Path: pf, Limit: limit, Context: ctxLines, Pull: pull != nil,
			From:   codeindex.Pos(pos),
			Redact: func(lines []string) []string { return s.redactLines(ctx, lines, redactions) }})
	if err != nil {
		return shape.Doc{}, err
	}
	matches := make([]codeMatch, len(res.Matches))
	for i, m := range res.Matches {
		matches[i] = codeMatch{Repository: m.Repository, Commit: m.Commit, Path: m.Path, Line: m.Line, Text: m.Text, Snippet: m.Snippet, pos: searchCodePos(m.Pos)}
	}
	items := make([]any, len(matches))
	for i, m := range matches {
		items[i] = m
	}
	cursorAt := func(i int) any { return s.encodeCursor("search_code", hash, matches[i].pos) }
	// The query is not repeated: the agent has it, and the answer passes
	// through the tenant's known secrets, learned from repositories the
	// caller may not be granted. A repeated query came back with a guessed
	// secret redacted, which confirmed the guess (and said which of fifty
	// in one query).
	doc := shape.Doc{
		Head: []shape.Field{
			{Key: "regex", Value: in.Regex},
		},
		ListKey:    "matches",
		Items:      items,
		Cursor:     cursorAt,
		Redactions: redactions,
	}
	if pull != nil {
		doc.Head = append(doc.Head, shape.Field{Key: "pull_request", Value: pull.Number}, shape.Field{Key: "commit", Value: pull.HeadSHA})
	}
	switch {
	case res.More:
		doc.NextCursor = cursorAt(len(matches) - 1)
	case res.Truncated:
		// The budget ran out before the index did: continue after the last
		// chunk scanned.
		doc.NextCursor = s.encodeCursor("search_code", hash, searchCodePos(res.Next))
		doc.Head = append(doc.Head, shape.Field{Key: "note", Value: "The search budget ran out before the whole index was scanned; pass next_cursor to continue."})
	}
	return doc, nil
}

// codeSource is the candidate source of one search_code call: the
// tenant's search functions in PostgreSQL, over the repositories the
// session may view, or one pull request's head.
type codeSource struct {
	s        *session
	repoIDs  []int64
	pull     *postgres.PullCodeHead
	patterns []string
	regex    string
	prefix   string
}

func (c codeSource) Candidates(ctx context.Context, phase int, after int64, limit int) ([]codeindex.Candidate, error) {
	db := c.s.deps.DB.Tenant(c.s.principal.TenantID)
	if c.pull != nil {
		return db.SearchPullCandidates(ctx, c.repoIDs[0], c.pull.Number, phase, c.patterns, c.regex, c.prefix, after, limit)
	}
	return db.SearchCandidates(ctx, c.repoIDs, c.patterns, c.regex, c.prefix, after, limit)
}
