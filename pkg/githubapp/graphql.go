package githubapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// ErrGraphQLUnavailable is matched (errors.Is) when the GraphQL API
// answers 404 (a GitHub Enterprise Server without it, or a proxy that only
// forwards REST). Callers fall back to what REST says.
var ErrGraphQLUnavailable = errors.New("the GitHub GraphQL API is not available")

// ReviewThread is a pull-request review thread as GitHub shows it: REST
// lists the comments, but only GraphQL says whether the thread was
// resolved.
type ReviewThread struct {
	// RootCommentID is the database id of the thread's first comment (the
	// REST comment id), which is how the sync's findings are keyed.
	RootCommentID int64
	Resolved      bool
	Outdated      bool
	Path          string
	// Line and StartLine are on the current diff (nil when outdated);
	// OriginalLine and OriginalStartLine where the thread was written.
	Line, StartLine, OriginalLine, OriginalStartLine *int
	// Comments is the number of comments of the thread.
	Comments int
}

// reviewThreadsQuery pages a pull request's review threads. Only the first
// comment of each thread is read: the finding is the thread's first
// comment, replies are conversation. 50 threads a page keeps a query's
// cost at one point.
const reviewThreadsQuery = `query($owner: String!, $name: String!, $number: Int!, $first: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: $first, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes {
          isResolved isOutdated path line originalLine startLine originalStartLine
          comments(first: 1) { totalCount nodes { databaseId } }
        }
      }
    }
  }
}`

// graphQLThreadsPage is the number of threads asked for per query.
const graphQLThreadsPage = 50

// graphQLURL is the GraphQL endpoint for the REST API root:
// https://api.github.com/graphql for https://api.github.com/, and
// https://HOST/api/graphql for GitHub Enterprise Server's
// https://HOST/api/v3/.
func (a *App) graphQLURL() string {
	u := *a.apiURL
	if p, ok := strings.CutSuffix(u.Path, "/api/v3/"); ok {
		u.Path = p + "/api/graphql"
	} else {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/graphql"
	}
	return u.String()
}

// graphQL sends one query with the installation's token and decodes its
// data into v. A query is a POST but changes nothing, so it is retried
// like a GET. GitHub answers errors in a 200 with an "errors" list; those
// are errors here, and a RATE_LIMITED one is a rate limit.
func (c *InstallationClient) graphQL(ctx context.Context, op, query string, vars map[string]any, v any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	resp, raw, err := c.app.do(ctx, &request{op: op, method: http.MethodPost, url: c.app.graphQLURL(), cred: c,
		limit: &c.st.limit, follow: true, body: body, idempotent: true})
	if err != nil {
		var se *statusError
		if errors.As(err, &se) && se.Status == http.StatusNotFound {
			return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("%w: %w", ErrGraphQLUnavailable, err), "GitHub's GraphQL API is not available")
		}
		return err
	}
	var out struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: cannot decode the answer: %w", op, err),
			"GitHub returned an answer CodeLotse cannot read; try again in a moment")
	}
	if len(out.Errors) > 0 {
		e := out.Errors[0]
		if e.Type == "RATE_LIMITED" {
			if rl := rateLimitFromHeaders(http.StatusForbidden, resp.Header, false, c.app.clock.Now()); rl != nil {
				c.st.limit.block(rl)
				return rateLimited(op, rl)
			}
		}
		code := codelotse.Unavailable
		if e.Type == "NOT_FOUND" {
			code = codelotse.NotFound
		}
		msg := e.Message
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return codelotse.Wrap(code, fmt.Errorf("githubapp: %s: GraphQL error %s: %s", op, e.Type, msg), "GitHub's GraphQL API refused the query (GitHub said: "+msg+")")
	}
	if err := json.Unmarshal(out.Data, v); err != nil {
		return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: cannot decode the data: %w", op, err),
			"GitHub returned an answer CodeLotse cannot read; try again in a moment")
	}
	return nil
}

// ReviewThreads lists every review thread of a pull request, following
// GraphQL cursors; it fails after the App's page bound rather than return
// part of the list.
func (c *InstallationClient) ReviewThreads(ctx context.Context, fullName string, number int) ([]ReviewThread, error) {
	if _, err := c.pullPath(fullName, number, "threads"); err != nil {
		return nil, err
	}
	owner, name, _ := strings.Cut(fullName, "/")
	op := fmt.Sprintf("POST /graphql reviewThreads %s#%d", fullName, number)
	var threads []ReviewThread
	var cursor any
	for page := 1; ; page++ {
		var data struct {
			Repository *struct {
				PullRequest *struct {
					ReviewThreads struct {
						PageInfo struct {
							HasNextPage bool   `json:"hasNextPage"`
							EndCursor   string `json:"endCursor"`
						} `json:"pageInfo"`
						Nodes []struct {
							IsResolved        bool   `json:"isResolved"`
							IsOutdated        bool   `json:"isOutdated"`
							Path              string `json:"path"`
							Line              *int   `json:"line"`
							OriginalLine      *int   `json:"originalLine"`
							StartLine         *int   `json:"startLine"`
							OriginalStartLine *int   `json:"originalStartLine"`
							Comments          struct {
								TotalCount int `json:"totalCount"`
								Nodes      []struct {
									DatabaseID int64 `json:"databaseId"`
								} `json:"nodes"`
							} `json:"comments"`
						} `json:"nodes"`
					} `json:"reviewThreads"`
				} `json:"pullRequest"`
			} `json:"repository"`
		}
		pageOp := op
		if page > 1 {
			pageOp = fmt.Sprintf("%s (page %d)", op, page)
		}
		if err := c.graphQL(ctx, pageOp, reviewThreadsQuery, map[string]any{
			"owner": owner, "name": name, "number": number, "first": graphQLThreadsPage, "cursor": cursor,
		}, &data); err != nil {
			return nil, err
		}
		if data.Repository == nil || data.Repository.PullRequest == nil {
			return nil, codelotse.Errorf(codelotse.NotFound, "GitHub shows no pull request %s#%d to the GitHub App", fullName, number)
		}
		rt := data.Repository.PullRequest.ReviewThreads
		for _, n := range rt.Nodes {
			if len(n.Comments.Nodes) == 0 || n.Comments.Nodes[0].DatabaseID == 0 {
				continue // a thread whose comments were all deleted
			}
			threads = append(threads, ReviewThread{RootCommentID: n.Comments.Nodes[0].DatabaseID, Resolved: n.IsResolved, Outdated: n.IsOutdated,
				Path: n.Path, Line: n.Line, StartLine: n.StartLine, OriginalLine: n.OriginalLine, OriginalStartLine: n.OriginalStartLine,
				Comments: n.Comments.TotalCount})
		}
		if !rt.PageInfo.HasNextPage {
			return threads, nil
		}
		if rt.PageInfo.EndCursor == "" || rt.PageInfo.EndCursor == cursor {
			return nil, codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: the next page's cursor does not move", pageOp),
				"GitHub returned an inconsistent list; try again in a moment")
		}
		if page >= c.app.maxPages {
			return nil, codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: more than %d pages; stopped rather than keep a partial list", op, c.app.maxPages),
				fmt.Sprintf("GitHub returned more than %d pages; CodeLotse does not sync a partial list", c.app.maxPages))
		}
		cursor = rt.PageInfo.EndCursor
	}
}
