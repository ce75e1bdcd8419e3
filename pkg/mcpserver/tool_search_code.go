package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/shape"
)

var searchCode = tool{
	name:  "search_code",
	title: "Search code",
	description: "Searches the code index (the indexed commit of each repository you can view) line by line for a literal or an RE2 regular expression, and returns matching lines with numbered context. " +
		"Pass next_cursor back as cursor to page. " +
		"Call get_file_contents with a match's repository and path to read more of the file.",
	schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "Text to find on one line; a literal unless regex is true."},
    "repository": {"type": ["string", "integer"], "description": "Repository id or full name (owner/name); omit to search every repository you can view."},
    "path": {"type": "string", "description": "Only files under this path prefix (e.g. pkg/) or matching this glob (e.g. **/*_test.go)."},
    "regex": {"type": "boolean", "default": false, "description": "Treat query as an RE2 regular expression. A regex without a literal of 3+ characters needs repository or path."},
    "case_sensitive": {"type": "boolean", "default": false},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20, "description": "At most this many matches (1-100, default 20)."},
    "context": {"type": "integer", "minimum": 0, "maximum": 5, "default": 2, "description": "Lines of context before and after each match (0-5, default 2)."},
    "cursor": {"type": "string", "description": "next_cursor from a previous search_code result with the same arguments."}
  },
  "required": ["query"],
  "additionalProperties": false
}`),
	run: runSearchCode,
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

type searchCodePos struct {
	Chunk int64  `json:"c"`
	Line  int    `json:"l"`
	Hash  string `json:"h"`
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

func runSearchCode(ctx context.Context, s *session, raw json.RawMessage) (shape.Doc, error) {
	var in struct {
		Query         string          `json:"query"`
		Repository    json.RawMessage `json:"repository"`
		Path          string          `json:"path"`
		Regex         bool            `json:"regex"`
		CaseSensitive bool            `json:"case_sensitive"`
		Limit         *int            `json:"limit"`
		Context       *int            `json:"context"`
		Cursor        string          `json:"cursor"`
	}
	if err := decodeArgs(raw, &in); err != nil {
		return shape.Doc{}, err
	}
	limit := clamp(in.Limit, 1, 100, 20)
	ctxLines := clamp(in.Context, 0, codeindex.MaxContext, 2)
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
	var repoIDs []int64
	if given {
		r, err := postgres.ResolveRepository(ctx, s.deps.DB, s.principal.TenantID, s.filter(), ref)
		if err != nil {
			return shape.Doc{}, err
		}
		if r.IndexedCommit == "" {
			return shape.Doc{}, codelotse.Errorf(codelotse.NotFound, "Repository %s has no code index yet.", r.FullName)
		}
		repoIDs = []int64{r.ID}
	} else {
		repoIDs, err = postgres.IndexedRepositoryIDs(ctx, s.deps.DB, s.principal.TenantID, s.filter())
		if err != nil {
			return shape.Doc{}, err
		}
		if len(repoIDs) == 0 {
			return shape.Doc{}, codelotse.Errorf(codelotse.NotFound, "No repository you can view has a code index yet.")
		}
	}

	hash := argsHash(in.Query, string(in.Repository), in.Path, in.Regex, in.CaseSensitive)
	var pos searchCodePos
	if in.Cursor != "" {
		if err := decodeCursor("search_code", in.Cursor, &pos); err != nil {
			return shape.Doc{}, err
		}
		if pos.Hash != hash {
			return shape.Doc{}, codelotse.Errorf(codelotse.Invalid, "Invalid cursor: it belongs to a search with other arguments; omit cursor to start over.")
		}
	}

	start := time.Now()
	var matches []codeMatch
	redactions := map[string]int{}
	after := pos.Chunk - 1 // re-read the cursor's chunk, skipping lines up to pos.Line
	if pos.Chunk == 0 {
		after = 0
	}
	exhausted, budgetSpent := false, false
	for round := 0; len(matches) <= limit; round++ {
		if round >= searchMaxRounds || time.Since(start) > searchBudget {
			budgetSpent = true
			break
		}
		cands, err := postgres.SearchCandidates(ctx, s.deps.DB, s.principal.TenantID, repoIDs, plan.LikePatterns(), pf.Prefix, after, searchBatch)
		if err != nil {
			return shape.Doc{}, err
		}
		for _, c := range cands {
			after = c.ChunkID
			if !pf.Match(c.Path) {
				continue
			}
			lines := s.redactLines(strings.Split(c.Content, "\n"), redactions)
			from, to := codeindex.Owned(c.StartLine, c.EndLine, c.LineCount)
			for n := from; n <= to; n++ {
				if c.ChunkID == pos.Chunk && n <= pos.Line {
					continue
				}
				line := lines[n-c.StartLine]
				if !plan.Match.MatchString(line) {
					continue
				}
				m := codeMatch{Repository: c.FullName, Commit: c.Commit, Path: c.Path, Line: n, Text: clip(line),
					pos: searchCodePos{Chunk: c.ChunkID, Line: n, Hash: hash}}
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
	cursorAt := func(i int) any { return encodeCursor("search_code", matches[i].pos) }
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
	switch {
	case more:
		doc.NextCursor = cursorAt(len(matches) - 1)
	case !exhausted && budgetSpent:
		// The budget ran out before the index did: continue after the last
		// chunk scanned.
		doc.NextCursor = encodeCursor("search_code", searchCodePos{Chunk: after + 1, Line: 0, Hash: hash})
		doc.Head = append(doc.Head, shape.Field{Key: "note", Value: "The search budget ran out before the whole index was scanned; pass next_cursor to continue."})
	}
	return doc, nil
}

// clip shortens very long lines (minified files) for display.
func clip(s string) string {
	if len(s) <= maxLineBytes {
		return s
	}
	cut := maxLineBytes
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// argsHash ties a cursor to the arguments it was made for.
func argsHash(parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%v\x00", p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
