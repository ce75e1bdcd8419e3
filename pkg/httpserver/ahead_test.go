package httpserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/ratelimit"
)

// TestOneRoundTripPerRequest (issue 11): once a token has been accepted, a
// tools/call costs one PostgreSQL round trip for the token, its grants and
// the tool's first read together, and a request that reads nothing costs
// the token lookup alone. And the cache behind it refuses nothing late: the
// very next request after a revocation is a 401, and after access to a
// repository is removed the very next answer no longer shows it (the
// answer computed on the old grants never leaves). Round trips are counted
// as connections taken from the pool, not timed.
func TestOneRoundTripPerRequest(t *testing.T) {
	env := pgtest.New(t)
	m := seedMember(t, env, "acme/api", "acme/web")
	srv, bearer := quietServer(t, env, nil)
	const (
		listRepos = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_repositories","arguments":{}}}`
		getRules  = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_rules","arguments":{}}}`
		toolsList = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	)
	// call serves one request and reports the round trips it took; the
	// token's background use record is waited for so it is never counted.
	path := "/mcp"
	call := func(body string) (*httptest.ResponseRecorder, int64) {
		t.Helper()
		req := mcpRequest(m.Secret, nil)
		req.URL.Path = path
		req.Body = io.NopCloser(strings.NewReader(body))
		req.ContentLength = int64(len(body))
		before := env.App.Acquires()
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		n := env.App.Acquires() - before
		bearer.Wait()
		return rec, n
	}

	if rec, _ := call(listRepos); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "acme/web") {
		t.Fatalf("first request: %d %s", rec.Code, rec.Body)
	}
	for _, tc := range []struct {
		name, body string
		want       int64
	}{
		{"list_repositories", listRepos, 1},
		{"get_rules", getRules, 1},
		{"tools/list (reads nothing: the token lookup alone)", toolsList, 1},
		{"list_repositories again", listRepos, 1},
	} {
		rec, n := call(tc.body)
		if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"isError":true`) {
			t.Fatalf("%s: %d %s", tc.name, rec.Code, rec.Body)
		}
		if n != tc.want {
			t.Errorf("%s: %d round trips, want %d", tc.name, n, tc.want)
		}
	}

	// The tenant's own endpoint: the token's facts name the slug's tenant,
	// so no lookup of the slug comes first. Another slug refuses it.
	path = "/t/acme/mcp"
	call(listRepos)
	if rec, n := call(getRules); rec.Code != http.StatusOK || n != 1 {
		t.Errorf("/t/acme/mcp: %d in %d round trips, want 200 in 1: %s", rec.Code, n, rec.Body)
	}
	path = "/t/other/mcp"
	if rec, _ := call(getRules); rec.Code != http.StatusUnauthorized {
		t.Errorf("/t/other/mcp: %d, want 401", rec.Code)
	}
	path = "/mcp"
	// What cannot be a slug is no tenant, answered before any lookup,
	// with no metadata to point to (a NUL byte used to reach PostgreSQL
	// as the resource and come back as a 503).
	for _, bad := range []string{"/t/%00/mcp", "/t/%C3%28/mcp", "/t/ACME/mcp"} {
		req := httptest.NewRequest(http.MethodPost, bad, strings.NewReader(getRules))
		for k, v := range mcpRequest(m.Secret, nil).Header {
			req.Header[k] = v
		}
		before := env.App.Acquires()
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		// (A NUL byte or bad UTF-8 in the path is refused as bad input,
		// 400, before any route.)
		refused := rec.Code == http.StatusUnauthorized || rec.Code == http.StatusBadRequest && bad != "/t/ACME/mcp"
		if !refused || strings.Contains(rec.Header().Get("WWW-Authenticate"), "resource_metadata") || env.App.Acquires() != before {
			t.Errorf("%s: %d, WWW-Authenticate %q, %d round trips; want 401 (or 400), no metadata, none",
				bad, rec.Code, rec.Header().Get("WWW-Authenticate"), env.App.Acquires()-before)
		}
	}

	// Access to acme/web is removed between two requests: the next answer
	// is computed on the new grants.
	if _, err := env.Admin.Pool.Exec(context.Background(),
		`DELETE FROM repo_memberships WHERE user_id = $1 AND repository_id = (SELECT id FROM repositories WHERE full_name = 'acme/web')`, m.UserID); err != nil {
		t.Fatal(err)
	}
	rec, _ := call(listRepos)
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "acme/web") || !strings.Contains(rec.Body.String(), "acme/api") {
		t.Fatalf("after acme/web was taken away: %d %s", rec.Code, rec.Body)
	}

	// Revoked between two requests: the very next one is refused.
	if err := env.App.InTenant(context.Background(), m.TenantID, func(tx *postgres.Tx) error {
		return tx.RevokeToken(context.Background(), m.TokenID, "", postgres.Actor{Label: "test"})
	}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{listRepos, toolsList} {
		rec, _ := call(body)
		if rec.Code != http.StatusUnauthorized || strings.Contains(rec.Body.String(), "acme/") {
			t.Fatalf("after revocation: %d %s", rec.Code, rec.Body)
		}
	}
}

// TestLimitedYetRevoked: a 429 is the one answer that leaves without a
// tool's read to confirm the cached facts, so a limited request of a
// token accepted a moment ago looks the token up first: once revoked, it
// is refused (401), not told to retry.
func TestLimitedYetRevoked(t *testing.T) {
	env := pgtest.New(t)
	m := seedMember(t, env, "acme/api")
	srv, _ := quietServer(t, env, func(c *Config) {
		c.Limiter = ratelimit.NewMemory()
		c.Limits.PerToken = ratelimit.Rule{Limit: 2, Period: time.Hour}
	})
	call := func() int {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, mcpRequest(m.Secret, nil))
		return rec.Code
	}
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if got := call(); got != want {
			t.Fatalf("request %d: %d, want %d", i+1, got, want)
		}
	}
	if err := env.App.InTenant(context.Background(), m.TenantID, func(tx *postgres.Tx) error {
		return tx.RevokeToken(context.Background(), m.TokenID, "", postgres.Actor{Label: "test"})
	}); err != nil {
		t.Fatal(err)
	}
	if got := call(); got != http.StatusUnauthorized {
		t.Errorf("limited and revoked: %d, want 401", got)
	}
}
