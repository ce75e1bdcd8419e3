package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

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

// Search budgets: candidate chunks fetched per round, rounds per call, and
// wall time per call. A call that spends its budget returns what it found
// with a cursor to continue.
//
// Each round is one call of search_code_candidates, which checks a window of
// the next chunks first (eight times the batch) and asks the trigram index
// only when the window holds too few candidates; a first round smaller than
// the batch was tried and made queries that need several rounds pay for the
// trigram route several times (docs/benchmarks.md).
const (
	searchBatch     = 200
	searchMaxRounds = 25
	searchBudget    = 1500 * time.Millisecond
	maxLineBytes    = 500
)

// searchCodePos is the last match shown: a chunk id and a line number.
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

	start := time.Now()
	var matches []codeMatch
	redactions := map[string]int{}
	after := pos.Chunk - 1 // re-read the cursor's chunk, skipping lines up to pos.Line
	if pos.Chunk == 0 {
		after = 0
	}
	phase := pos.Phase
	if pull != nil && phase == 0 {
		phase = 1
	}
	exhausted, budgetSpent := false, false
	for round := 0; len(matches) <= limit; round++ {
		if round >= searchMaxRounds || time.Since(start) > searchBudget {
			budgetSpent = true
			break
		}
		var cands []postgres.Candidate
		if pull != nil {
			cands, err = s.deps.DB.Tenant(s.principal.TenantID).SearchPullCandidates(ctx, repoIDs[0], pull.Number, phase, plan.LikePatterns(), pf.Prefix, after, searchBatch)
		} else {
			cands, err = s.deps.DB.Tenant(s.principal.TenantID).SearchCandidates(ctx, repoIDs, plan.LikePatterns(), pf.Prefix, after, searchBatch)
		}
		if err != nil {
			return shape.Doc{}, err
		}
		for _, c := range cands {
			after = c.ChunkID
			if c.Shadowed || !pf.Match(c.Path) {
				continue
			}
			// The stored lines are redacted (pkg/ingest): matching runs on
			// what an agent may see. The lines shown are redacted once more
			// as a window (a second layer that also catches what newer
			// rules or the tenant's known secrets find), only for chunks
			// with a match, and clipped only after that.
			stored := strings.Split(c.Content, "\n")
			var lines []string
			from, to := codeindex.Owned(c.StartLine, c.EndLine, c.LineCount)
			for n := from; n <= to; n++ {
				if c.ChunkID == pos.Chunk && phase == pos.Phase && n <= pos.Line {
					continue
				}
				if !plan.Match.MatchString(stored[n-c.StartLine]) {
					continue
				}
				if lines == nil {
					lines = s.redactLines(ctx, stored, redactions)
				}
				line := lines[n-c.StartLine]
				m := codeMatch{Repository: c.FullName, Commit: c.Commit, Path: c.Path, Line: n, Text: clip(line),
					pos: searchCodePos{Chunk: c.ChunkID, Line: n, Phase: phaseOf(pull, phase)}}
				if ctxLines > 0 {
					var b strings.Builder
					for k := max(c.StartLine, n-ctxLines); k <= min(c.EndLine, n+ctxLines); k++ {
						mark := ":"
						if k == n {
							mark = ">"
						}
						fmt.Fprintf(&b, "%d%s %s\n", k, mark, clip(lines[k-c.StartLine]))
					}
					m.Snippet = strings.TrimSuffix(b.String(), "\n")
				}
				matches = append(matches, m)
			}
		}
		if len(cands) < searchBatch {
			if pull != nil && phase == 1 {
				// The changed files are done; the base index beneath them
				// is next, from its first chunk.
				phase, after = 2, 0
				continue
			}
			exhausted = true
			break
		}
	}

	more := len(matches) > limit
	if more {
		matches = matches[:limit]
	}
	items := make([]any, len(matches))
	for i, m := range matches {
		items[i] = m
	}
	cursorAt := func(i int) any { return s.encodeCursor("search_code", hash, matches[i].pos) }
	doc := shape.Doc{
		Head: []shape.Field{
			{Key: "query", Value: in.Query},
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
	case more:
		doc.NextCursor = cursorAt(len(matches) - 1)
	case !exhausted && budgetSpent:
		// The budget ran out before the index did: continue after the last
		// chunk scanned.
		doc.NextCursor = s.encodeCursor("search_code", hash, searchCodePos{Chunk: after + 1, Line: 0, Phase: phaseOf(pull, phase)})
		doc.Head = append(doc.Head, shape.Field{Key: "note", Value: "The search budget ran out before the whole index was scanned; pass next_cursor to continue."})
	}
	return doc, nil
}

// phaseOf is the cursor phase: 0 outside pull-request searches.
func phaseOf(pull *postgres.PullCodeHead, phase int) int {
	if pull == nil {
		return 0
	}
	return phase
}

// clip shortens very long lines (minified files) for display. It runs only
// on redacted lines (shortening first would cut a token so the redactor no
// longer recognises it and show half of it), and never cuts inside a
// [REDACTED:…] placeholder: a placeholder the cut would split is left out
// whole.
func clip(s string) string {
	if len(s) <= maxLineBytes {
		return s
	}
	cut := maxLineBytes
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	const ph = "[REDACTED:"
	if open := strings.LastIndex(s[:min(len(s), cut+len(ph)-1)], ph); open >= 0 && open < cut {
		if end := strings.IndexByte(s[open:], ']'); end < 0 || open+end >= cut {
			cut = open
		}
	}
	return s[:cut] + "…"
}
