package httpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/postgres"
)

// The authorization endpoint is no open redirector (RFC 9700 §4.11.2):
// anyone can register a redirect URI, so an error is sent to it only as the
// answer to the consent page that a signed-in person saw for that client.
// Every error before that, signed in or not, is shown on this origin's own
// page, whatever the redirect URI (https, loopback, a private-use scheme).
func TestOAuthAuthorizeErrorsAreNoOpenRedirect(t *testing.T) {
	f := newOAuthFixture(t, nil)
	redirects := []string{"https://evil.example/login", "http://127.0.0.1:8000/admin/delete", "ms-evil:payload"}
	clientID := f.register(redirects...)
	setSwitch := func(oauthOn, mcpOn bool) {
		t.Helper()
		if err := f.env.App.InTenant(context.Background(), f.m.TenantID, func(tx *postgres.Tx) error {
			if _, err := tx.SetOAuthEnabled(context.Background(), oauthOn, postgres.Actor{Label: "test"}); err != nil {
				return err
			}
			_, err := tx.SetMCPEnabled(context.Background(), mcpOn, postgres.Actor{Label: "test"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name        string
		mod         func(url.Values)
		oauth, mcp  bool
		status      int
		description string
	}{
		{"bad response_type", func(p url.Values) { p.Set("response_type", "x") }, true, true, 400, "unsupported_response_type"},
		{"missing resource", func(p url.Values) { p.Del("resource") }, true, true, 400, "invalid_target"},
		{"plain PKCE", func(p url.Values) { p.Set("code_challenge_method", "plain") }, true, true, 400, "invalid_request"},
		{"bad scope", func(p url.Values) { p.Set("scope", "admin") }, true, true, 400, "invalid_scope"},
		{"OAuth off", func(url.Values) {}, false, true, 403, "switched OAuth clients off"},
		{"MCP off", func(url.Values) {}, true, false, 403, "switched MCP off"},
	}
	for _, tc := range cases {
		setSwitch(tc.oauth, tc.mcp)
		for _, redirect := range redirects {
			p := authParams(clientID, redirect)
			tc.mod(p)
			for _, cookie := range []*http.Cookie{nil, f.cookie} {
				req := httptest.NewRequest(http.MethodGet, "/t/acme/oauth/authorize?"+p.Encode(), nil)
				if cookie != nil {
					req.AddCookie(cookie)
				}
				rec := f.do(req)
				loc := rec.Header().Get("Location")
				if strings.HasPrefix(loc, redirect) || strings.Contains(loc, "error=") {
					t.Errorf("%s, signed in %v, %s: redirected to %s", tc.name, cookie != nil, redirect, loc)
				}
				if cookie != nil && (rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.description)) {
					t.Errorf("%s, signed in, %s: %d, want %d and a page naming %q", tc.name, redirect, rec.Code, tc.status, tc.description)
				}
			}
		}
	}
	// The answer to the consent page goes back to the client, as it must.
	setSwitch(true, true)
	for _, redirect := range redirects {
		rec, q := f.authorize(authParams(clientID, redirect), f.cookie, "deny")
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), redirect) || q.Get("error") != "access_denied" {
			t.Errorf("deny for %s: %d %q", redirect, rec.Code, rec.Header().Get("Location"))
		}
	}
}
