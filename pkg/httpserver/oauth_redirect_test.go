package httpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/tokens"
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

// While a tenant admin has switched OAuth clients off, the tenant publishes
// no authorization discovery (ARCHITECTURE §4: complete or absent): its
// protected-resource and authorization-server metadata answer 404, and 401s
// from its endpoint name no resource_metadata, so a header-configured
// client is never sent into a flow that ends in a refusal. Switched on
// again, all of it is back.
func TestOAuthDiscoveryFollowsTheTenantSwitch(t *testing.T) {
	f := newOAuthFixture(t, nil)
	_, a := f.connect()
	set := func(on bool) {
		t.Helper()
		if err := f.env.App.InTenant(context.Background(), f.m.TenantID, func(tx *postgres.Tx) error {
			_, err := tx.SetOAuthEnabled(context.Background(), on, postgres.Actor{Label: "test"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	documents := []string{"/.well-known/oauth-protected-resource/t/acme/mcp", "/.well-known/oauth-authorization-server/t/acme",
		"/.well-known/openid-configuration/t/acme", "/t/acme/.well-known/oauth-authorization-server"}
	// A refused unknown token, a refused OAuth token, and a token without grants.
	noGrants := f.patWithoutGrants()
	refusals := map[string]string{"unknown token": "clt_bad", "OAuth token": a.AccessToken, "no grants": noGrants}
	check := func(on bool) {
		t.Helper()
		for _, p := range documents {
			rec := f.do(httptest.NewRequest(http.MethodGet, p, nil))
			if on && rec.Code != http.StatusOK || !on && (rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "authorization_servers") || strings.Contains(rec.Body.String(), "issuer")) {
				t.Errorf("OAuth on %v: %s answers %d %s", on, p, rec.Code, rec.Body)
			}
		}
		for name, tok := range refusals {
			st, out := f.mcpCall("/t/acme/mcp", tok)
			if st != http.StatusUnauthorized {
				t.Errorf("OAuth on %v, %s: %d, want 401", on, name, st)
			}
			if strings.Contains(out, "resource_metadata") != on {
				t.Errorf("OAuth on %v, %s: 401 header %s", on, name, out)
			}
		}
		// Personal access tokens work either way.
		if st, _ := f.mcpCall("/t/acme/mcp", f.m.Secret); st != http.StatusOK {
			t.Errorf("OAuth on %v: personal access token %d", on, st)
		}
	}
	set(false)
	check(false)
	set(true)
	refusals["OAuth token"] = "clt_" + strings.Repeat("A", 43) // the grant's token works again
	check(true)
}

// patWithoutGrants is a personal access token of another member of acme
// whose membership has expired: accepted, but with no grants (a 401 with
// the refresh description).
func (f *oauthFixture) patWithoutGrants() string {
	f.t.Helper()
	ctx := context.Background()
	secret := tokens.Generate()
	if err := f.env.Admin.InTenant(ctx, f.m.TenantID, func(tx *postgres.Tx) error {
		u, err := tx.UpsertLocalUser(ctx, "stale@acme.test", "", codelotse.RoleMember, time.Now())
		if err != nil {
			return err
		}
		exp, _ := tokens.ExpiresAt(time.Now(), 30)
		if _, err := tx.CreateToken(ctx, postgres.NewToken{UserID: u.ID, Name: "t", Secret: secret, ExpiresAt: exp}, time.Now(), postgres.Actor{Label: "test"}); err != nil {
			return err
		}
		return tx.ExpireMembership(ctx, u.ID, postgres.Actor{Label: "test"})
	}); err != nil {
		f.t.Fatal(err)
	}
	if st, out := f.mcpCall("/t/acme/mcp", secret); st != http.StatusUnauthorized || !strings.Contains(out, "sign in") {
		f.t.Fatalf("a token without grants: %d %s", st, out)
	}
	return secret
}
