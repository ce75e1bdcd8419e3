package githubtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The GraphQL API, for installation tokens:
//
//	POST /api/graphql (and /graphql at the root)   the reviewThreads query of a pull request
//
// It is no GraphQL engine: it recognises the one query the sync sends (by
// its reviewThreads selection) and answers in GitHub's shape — threads
// with isResolved, isOutdated, line, originalLine, startLine,
// originalStartLine, path and their comments, paged by cursor with
// pageInfo { hasNextPage endCursor } — with GitHub's errors for a missing
// repository or pull request and for other queries. Each review comment
// that is not a reply starts a thread; ResolveThread resolves one.

// ResolveThread marks the review thread that comment rootID starts as
// resolved (true) or unresolved (false), as a reviewer clicking "Resolve
// conversation" does. The REST API does not show it; GraphQL does.
func (s *Server) ResolveThread(repoID int64, number int, rootID int64, resolved bool) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.comments[pullKey{repoID, number}] {
		if c.ID == rootID && c.InReplyTo == 0 {
			c.Resolved = resolved
			return
		}
	}
	s.t.Fatalf("githubtest: ResolveThread: no thread started by comment %d on %d#%d", rootID, repoID, number)
}

// SetGraphQL switches the GraphQL endpoint off (404, as on a GitHub
// Enterprise Server without it) or on again.
func (s *Server) SetGraphQL(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.graphQLOff = !on
}

func (s *Server) isGraphQL(path string) bool {
	return path == "/api/graphql" || path == "/graphql"
}

func (s *Server) graphql(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.takeFailure("/graphql"); ok {
		s.fail(w, f)
		return
	}
	if s.graphQLOff {
		writeJSON(w, http.StatusNotFound, notFound())
		return
	}
	id, ok := s.authenticateInstallation(w, r)
	if !ok {
		return
	}
	h := w.Header()
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4999")
	h.Set("X-RateLimit-Resource", "graphql")
	var q struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&q); err != nil || q.Query == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON", "documentation_url": "https://docs.github.com/graphql"})
		return
	}
	if !strings.Contains(q.Query, "reviewThreads") {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{"message": "githubtest serves only the reviewThreads query"}}})
		return
	}
	str := func(k string) string { v, _ := q.Variables[k].(string); return v }
	owner, name := str("owner"), str("name")
	number, _ := q.Variables["number"].(float64)
	first := 100
	if f, ok := q.Variables["first"].(float64); ok && f >= 1 && f <= 100 {
		first = int(f)
	}
	first = min(first, s.maxPerPage)
	rp := s.repoByName(owner, name)
	if rp == nil || rp.installationID != id {
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": nil}, "errors": []any{map[string]any{
			"type": "NOT_FOUND", "path": []string{"repository"}, "locations": []any{map[string]int{"line": 1, "column": 2}},
			"message": fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", owner, name)}}})
		return
	}
	pr := s.pull(rp.ID, int(number))
	if pr == nil {
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": nil}}, "errors": []any{map[string]any{
			"type": "NOT_FOUND", "path": []string{"repository", "pullRequest"},
			"message": fmt.Sprintf("Could not resolve to a PullRequest with the number of %d.", int(number))}}})
		return
	}
	comments := sortedByID(s.comments[pullKey{rp.ID, pr.Number}], func(c *ReviewComment) int64 { return c.ID })
	var roots []*ReviewComment
	for _, c := range comments {
		if c.InReplyTo == 0 {
			roots = append(roots, c)
		}
	}
	start := 0
	if after := str("cursor"); after != "" {
		b, err := base64.StdEncoding.DecodeString(after)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "cursor:v2:"))
		if err != nil || err2 != nil || n < 0 || n > len(roots) {
			writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{"message": "`" + after + "` does not appear to be a valid cursor."}}})
			return
		}
		start = n
	}
	end := min(start+first, len(roots))
	nodes := []any{}
	for _, root := range roots[start:end] {
		thread := []any{}
		for _, c := range comments {
			if c.ID == root.ID || c.InReplyTo == root.ID {
				thread = append(thread, s.threadCommentJSON(rp, pr, c))
			}
		}
		var startLine, originalStartLine any
		if root.StartLine != 0 {
			originalStartLine = root.StartLine
			if root.Line != 0 {
				startLine = root.StartLine
			}
		}
		nodes = append(nodes, map[string]any{
			"id":                fmt.Sprintf("PRRT_kwDO%d", root.ID),
			"isResolved":        root.Resolved,
			"isOutdated":        root.Line == 0,
			"isCollapsed":       root.Resolved,
			"path":              root.Path,
			"diffSide":          "RIGHT",
			"line":              nullableInt(root.Line),
			"originalLine":      nullableInt(root.OriginalLine),
			"startLine":         startLine,
			"originalStartLine": originalStartLine,
			"subjectType":       "LINE",
			"comments":          map[string]any{"totalCount": len(thread), "nodes": thread},
		})
	}
	var endCursor any
	if end > start {
		endCursor = base64.StdEncoding.EncodeToString([]byte("cursor:v2:" + strconv.Itoa(end)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": map[string]any{
		"reviewThreads": map[string]any{
			"totalCount": len(roots),
			"pageInfo":   map[string]any{"hasNextPage": end < len(roots), "endCursor": endCursor},
			"nodes":      nodes,
		}}}}})
}

func (s *Server) threadCommentJSON(rp *repo, pr *PullRequest, c *ReviewComment) map[string]any {
	var replyTo any
	if c.InReplyTo != 0 {
		replyTo = map[string]any{"databaseId": c.InReplyTo}
	}
	login := c.Author
	if c.AuthorType == "Bot" {
		// GraphQL names bots without the "[bot]" suffix REST shows.
		login = strings.TrimSuffix(login, "[bot]")
	}
	return map[string]any{
		"id":                fmt.Sprintf("PRRC_kwDO%d", c.ID),
		"databaseId":        c.ID,
		"body":              c.Body,
		"author":            map[string]any{"login": login},
		"createdAt":         ts(c.CreatedAt),
		"url":               fmt.Sprintf("%s%s/pull/%d#discussion_r%d", s.WebURL, s.fullName(rp), pr.Number, c.ID),
		"commit":            map[string]any{"oid": c.CommitID},
		"originalCommit":    map[string]any{"oid": c.OriginalCommitID},
		"pullRequestReview": map[string]any{"databaseId": c.ReviewID},
		"replyTo":           replyTo,
	}
}
