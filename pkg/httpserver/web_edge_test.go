package httpserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/oidc"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/ratelimit"
)

// webFixture is a server with cookie sessions on a real database, tenant
// "acme" and an admin's session cookie.
func webFixture(t *testing.T, limits Limits) (*Server, *pgtest.Env, string, *http.Cookie) {
	t.Helper()
	env := pgtest.New(t)
	ctx := context.Background()
	tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "acme", Name: "Acme"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	sessions := &authn.Sessions{DB: env.App}
	var cookie *http.Cookie
	err = env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
		u, err := tx.UpsertLocalUser(ctx, "boss@acme.test", "", codelotse.RoleAdmin, time.Now())
		if err != nil {
			return err
		}
		cookie, err = sessions.Start(ctx, tx, u.ID, false, "", nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{PublicURL: "http://127.0.0.1:8080", DB: env.App, Sessions: sessions, OIDC: oidc.NewClient(nil),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Limiter: ratelimit.NewMemory(), Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return srv, env, tn.ID, cookie
}

func get(srv *Server, path string, cookie *http.Cookie) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec
}

// TestAdminNoticeShowsOnlyKnownMessages: done= selects one of the page's
// own notices; any other text in the link is not shown.
func TestAdminNoticeShowsOnlyKnownMessages(t *testing.T) {
	srv, _, _, cookie := webFixture(t, DefaultLimits)
	rec := get(srv, "/t/acme/admin?done=token-revoked", cookie)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "Token revoked.") {
		t.Fatalf("known notice: %d %.300s", rec.Code, rec.Body)
	}
	rec = get(srv, "/t/acme/admin?done=Your+session+expired.+Sign+in+at+evil.example", cookie)
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	if strings.Contains(rec.Body.String(), "evil.example") || strings.Contains(rec.Body.String(), "session expired") {
		t.Error("the admin page reflects text from done=")
	}
}

// TestLoginIsRateLimitedPerAddress: unauthenticated sign-in starts are
// limited per address before anything is stored.
func TestLoginIsRateLimitedPerAddress(t *testing.T) {
	limits := DefaultLimits
	limits.Login = ratelimit.Rule{Limit: 2, Period: time.Minute}
	srv, _, _, _ := webFixture(t, limits)
	for i := range 2 {
		if rec := get(srv, "/t/acme/login", nil); rec.Code == http.StatusTooManyRequests {
			t.Fatalf("start %d was limited", i+1)
		}
	}
	rec := get(srv, "/t/acme/login", nil)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("third start in a minute with a limit of 2: %d (Retry-After %q)", rec.Code, rec.Header().Get("Retry-After"))
	}
	if !strings.Contains(rec.Body.String(), "Too many sign-in") {
		t.Errorf("429 page: %.300s", rec.Body)
	}
}

// TestExpiredLoginStatesArePurged: the scheduled purge deletes expired
// states of every tenant and keeps live ones; the runtime role cannot reach
// a live state through it.
func TestExpiredLoginStatesArePurged(t *testing.T) {
	_, env, tid, _ := webFixture(t, DefaultLimits)
	ctx := context.Background()
	err := env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		for i, ttl := range []time.Duration{-time.Hour, -time.Minute, 10 * time.Minute} {
			if err := tx.CreateLoginState(ctx, authn.HashValue(strings.Repeat("x", i+1)), postgres.LoginState{Kind: "oidc"}, ttl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := env.App.PurgeExpiredLoginStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("purged %d states, want the 2 expired ones", n)
	}
	var left int
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM login_states WHERE expires_at > now()`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 1 {
		t.Errorf("%d live states left, want 1", left)
	}
}

// TestBadSlugsAreNotFound: a slug with %00 or other bytes PostgreSQL or the
// schema refuses is a 400 or 404 page, never a 500.
func TestBadSlugsAreNotFound(t *testing.T) {
	srv, _, _, cookie := webFixture(t, DefaultLimits)
	for _, path := range []string{"/t/ac%00me/login", "/t/%00/mcp", "/t/acme%00/admin", "/t/" + strings.Repeat("a", 300) + "/login", "/t/%C3%28/login", "/t/ACME/login"} {
		rec := get(srv, path, cookie)
		if rec.Code != http.StatusNotFound && rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400 or 404", path, rec.Code)
		}
	}
}

// TestWebInputMistakesAreNot500: NUL bytes, bad UTF-8 and malformed ids in
// the query, the path or a form of every route that takes input are client
// errors (4xx pages), never a 500.
func TestWebInputMistakesAreNot500(t *testing.T) {
	srv, _, _, cookie := webFixture(t, DefaultLimits)
	form := func(path, body string) *http.Request {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://127.0.0.1:8080")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.AddCookie(cookie)
		return req
	}
	getReq := func(path string) *http.Request {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.AddCookie(cookie)
		return req
	}
	reqs := []*http.Request{
		getReq("/auth/link?v=a%00b"),
		getReq("/auth/link?v=%FF%FE"),
		form("/auth/link", "v=a%00b"),
		getReq("/auth/oidc/callback?state=a%00b&code=x"),
		getReq("/auth/oidc/callback?state=00000000-0000-0000-0000-000000000000.x%00&code=x"),
		getReq("/auth/github/callback?state=a%00.b&code=x"),
		getReq("/t/acme/admin?done=%00"),
		form("/t/acme/mcp/tokens", "name=a%00b&expires_days=30"),
		form("/t/acme/mcp/tokens", "name=ok&expires_days=99999999999999999999"),
		form("/t/acme/mcp/tokens", "name=%FF%FE&expires_days=30"),
		form("/t/acme/mcp/tokens/not-a-uuid/revoke", ""),
		form("/t/acme/mcp/tokens/a%00b/revoke", ""),
		form("/t/acme/admin/tokens/not-a-uuid/revoke", ""),
		form("/t/acme/admin/idp", "issuer=https://idp.example%00&client_id=c&client_secret=s"),
		form("/t/acme/admin/idp", "issuer=https://idp.example&client_id=c%00&client_secret=s%00&groups_claim=g%00&scopes=openid%00"),
		form("/t/acme/admin/mappings", "group=g%00&role=member"),
		form("/t/acme/admin/mappings", "group=g&role=member&repository=a%00/b"),
		form("/t/acme/admin/mappings/99999999999999999999/delete", ""),
		form("/t/acme/admin/mappings/%00/delete", ""),
		form("/t/acme/admin/mcp", "enabled=%00"),
	}
	for _, req := range reqs {
		target := req.Method + " " + req.URL.String()
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Errorf("%s: %d %.200s", target, rec.Code, rec.Body)
		}
	}
}

// TestAdminDeleteMissingMapping: removing a mapping that does not exist
// says so on the admin page (and only a missing row reads as "No such
// mapping."; storage errors stay errors, see pkg/postgres).
func TestAdminDeleteMissingMapping(t *testing.T) {
	srv, _, _, cookie := webFixture(t, DefaultLimits)
	req := httptest.NewRequest(http.MethodPost, "/t/acme/admin/mappings/424242/delete", nil)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://127.0.0.1:8080")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "No such mapping.") {
		t.Errorf("deleting a missing mapping: %d %.300s", rec.Code, rec.Body)
	}
}
