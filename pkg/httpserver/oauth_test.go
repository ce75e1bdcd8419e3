package httpserver

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/ratelimit"
	"github.com/codelotse/codelotse/pkg/safehttp"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
	"github.com/codelotse/codelotse/pkg/tokens"
)

const oauthBase = "http://127.0.0.1:8080"

type oauthFixture struct {
	t        *testing.T
	env      *pgtest.Env
	srv      *Server
	m        member
	sessions *authn.Sessions
	cookie   *http.Cookie
}

func newOAuthFixture(t *testing.T, mod func(*Config)) *oauthFixture {
	t.Helper()
	env := pgtest.New(t)
	m := seedMember(t, env, "acme/api", "acme/web")
	var logs io.Writer = io.Discard
	if testing.Verbose() {
		logs = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	bearer := &authn.Bearer{DB: env.App, Logger: logger}
	t.Cleanup(bearer.Wait)
	sessions := &authn.Sessions{DB: env.App}
	cfg := Config{
		PublicURL: oauthBase, DB: env.App, Bearer: bearer, Logger: logger, Sessions: sessions,
		MCP:   &mcpserver.Deps{DB: env.App, Shaper: shape.New(secretscan.New()), Logger: logger, SchemaCache: mcpserver.NewSchemaCache()},
		OAuth: OAuthConfig{Enabled: true, DynamicRegistration: true},
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &oauthFixture{t: t, env: env, srv: srv, m: m, sessions: sessions}
	f.cookie = f.signIn(m.TenantID, m.UserID, false)
	return f
}

func (f *oauthFixture) signIn(tid, uid string, breakGlass bool) *http.Cookie {
	f.t.Helper()
	var c *http.Cookie
	err := f.env.App.InTenant(context.Background(), tid, func(tx *postgres.Tx) error {
		var err error
		c, err = f.sessions.Start(context.Background(), tx, uid, breakGlass, "", nil)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *oauthFixture) do(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, req)
	return rec
}

func (f *oauthFixture) register(redirects ...string) string {
	f.t.Helper()
	b, _ := json.Marshal(map[string]any{"client_name": "Test Client", "redirect_uris": redirects, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code", "refresh_token"}})
	rec := f.do(httptest.NewRequest(http.MethodPost, "/t/acme/oauth/register", strings.NewReader(string(b))))
	if rec.Code != http.StatusCreated {
		f.t.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	var out struct {
		ClientID string `json:"client_id"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return out.ClientID
}

func pkce(v string) string {
	s := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(s[:])
}

var verifier = strings.Repeat("verifier-", 6)

func authParams(clientID, redirect string) url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect}, "state": {"st-1"},
		"code_challenge": {pkce(verifier)}, "code_challenge_method": {"S256"}, "resource": {oauthBase + "/t/acme/mcp"}, "scope": {"mcp:read"}}
}

// authorize runs the person's side with cookie: the consent page, then the
// decision. It returns the redirect's query.
func (f *oauthFixture) authorize(p url.Values, cookie *http.Cookie, decision string) (*httptest.ResponseRecorder, url.Values) {
	f.t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/t/acme/oauth/authorize?"+p.Encode(), nil)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	rec := f.do(req)
	if rec.Code != http.StatusOK || decision == "" {
		return rec, redirectQuery(rec)
	}
	form := url.Values{}
	for k, v := range p {
		form[k] = v
	}
	form.Set("decision", decision)
	post := httptest.NewRequest(http.MethodPost, "/t/acme/oauth/authorize", strings.NewReader(form.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.Header.Set("Sec-Fetch-Site", "same-origin")
	post.AddCookie(cookie)
	rec = f.do(post)
	return rec, redirectQuery(rec)
}

func redirectQuery(rec *httptest.ResponseRecorder) url.Values {
	loc := rec.Header().Get("Location")
	if loc == "" {
		return nil
	}
	u, err := url.Parse(loc)
	if err != nil {
		return nil
	}
	return u.Query()
}

type tokenAnswer struct {
	Status       int
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int    `json:"expires_in"`
	TokenType    string `json:"token_type"`
	Error        string `json:"error"`
	Header       http.Header
}

func (f *oauthFixture) token(form url.Values) tokenAnswer {
	f.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/t/acme/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := f.do(req)
	var a tokenAnswer
	_ = json.Unmarshal(rec.Body.Bytes(), &a)
	a.Status, a.Header = rec.Code, rec.Header()
	return a
}

func codeForm(clientID, code, redirect, v string) url.Values {
	f := url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code}, "redirect_uri": {redirect}, "resource": {oauthBase + "/t/acme/mcp"}}
	if v != "" {
		f.Set("code_verifier", v)
	}
	return f
}

// connect runs a whole flow and returns the client and its tokens.
func (f *oauthFixture) connect() (string, tokenAnswer) {
	f.t.Helper()
	const redirect = "http://127.0.0.1/callback"
	clientID := f.register(redirect)
	rec, q := f.authorize(authParams(clientID, "http://127.0.0.1:53682/callback"), f.cookie, "approve")
	if rec.Code != http.StatusSeeOther || q.Get("code") == "" {
		f.t.Fatalf("authorize: %d %s %v", rec.Code, rec.Body, q)
	}
	a := f.token(codeForm(clientID, q.Get("code"), "http://127.0.0.1:53682/callback", verifier))
	if a.Status != 200 || a.AccessToken == "" || a.RefreshToken == "" {
		f.t.Fatalf("token: %+v", a)
	}
	return clientID, a
}

// mcpCall calls list_repositories at path with token and returns the status
// and body.
func (f *oauthFixture) mcpCall(path, token string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_repositories","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Authorization", "Bearer "+token)
	rec := f.do(req)
	return rec.Code, rec.Body.String() + " " + rec.Header().Get("WWW-Authenticate")
}

func TestOAuthCodeFlow(t *testing.T) {
	f := newOAuthFixture(t, nil)
	const redirect = "http://127.0.0.1/callback"
	clientID := f.register(redirect)

	// Not signed in: the person is sent to the tenant's sign-in, which comes back here.
	rec, _ := f.authorize(authParams(clientID, redirect), nil, "")
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/t/acme/login?return_to=%2Ft%2Facme%2Foauth%2Fauthorize%3F") {
		t.Fatalf("signed out: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	// The consent page names the client, its redirect host, the tenant, the scope and the duration.
	rec, _ = f.authorize(authParams(clientID, "http://127.0.0.1:40000/callback"), f.cookie, "")
	body := rec.Body.String()
	for _, want := range []string{"Test Client", "127.0.0.1:40000", "acme", "read-only", "90 days", `value="approve"`, `value="deny"`} {
		if !strings.Contains(body, want) {
			t.Errorf("consent page lacks %q", want)
		}
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' http://127.0.0.1:40000") {
		t.Errorf("CSP %q does not allow exactly the redirect target", csp)
	}
	// Deny → access_denied with state and iss.
	_, q := f.authorize(authParams(clientID, redirect), f.cookie, "deny")
	if q.Get("error") != "access_denied" || q.Get("state") != "st-1" || q.Get("iss") != oauthBase+"/t/acme" {
		t.Fatalf("deny: %v", q)
	}
	// Approve (loopback on another port, RFC 8252).
	rec, q = f.authorize(authParams(clientID, "http://127.0.0.1:53682/callback"), f.cookie, "approve")
	if rec.Code != http.StatusSeeOther || q.Get("state") != "st-1" || q.Get("iss") != oauthBase+"/t/acme" || !strings.HasPrefix(q.Get("code"), "clc_") {
		t.Fatalf("approve: %d %v", rec.Code, q)
	}
	a := f.token(codeForm(clientID, q.Get("code"), "http://127.0.0.1:53682/callback", verifier))
	if a.Status != 200 || !tokens.Valid(a.AccessToken) || !strings.HasPrefix(a.RefreshToken, "clr_") || a.ExpiresIn != 3600 || a.TokenType != "Bearer" {
		t.Fatalf("token: %+v", a)
	}
	if a.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("token answer Cache-Control %q", a.Header.Get("Cache-Control"))
	}
	status, out := f.mcpCall("/t/acme/mcp", a.AccessToken)
	if status != 200 || !strings.Contains(out, "acme/api") || !strings.Contains(out, "acme/web") {
		t.Fatalf("tools/call with the OAuth token: %d %s", status, out)
	}
	// Bound to its resource: not valid at the root endpoint.
	if status, _ := f.mcpCall("/mcp", a.AccessToken); status != 401 {
		t.Fatalf("OAuth token at /mcp: %d, want 401", status)
	}
	// The personal access token works on both endpoints, exactly as before.
	for _, p := range []string{"/mcp", "/t/acme/mcp"} {
		if status, out := f.mcpCall(p, f.m.Secret); status != 200 {
			t.Fatalf("PAT at %s: %d %s", p, status, out)
		}
	}
	// The grant is on the MCP access page and audited.
	page := httptest.NewRequest(http.MethodGet, "/t/acme/mcp", nil)
	page.AddCookie(f.cookie)
	if body := f.do(page).Body.String(); !strings.Contains(body, "Test Client — via OAuth") || !strings.Contains(body, "2 of") && !strings.Contains(body, "/mcp/grants/") {
		t.Fatalf("MCP access page lacks the grant: %s", body)
	}
	f.wantAudit("oauth.granted")
}

func (f *oauthFixture) wantAudit(action string) {
	f.t.Helper()
	var n int
	if err := f.env.Admin.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = $2`, f.m.TenantID, action).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	if n == 0 {
		f.t.Errorf("no audit event %s", action)
	}
}

func TestOAuthAuthorizeRefusals(t *testing.T) {
	f := newOAuthFixture(t, nil)
	const redirect = "http://127.0.0.1/callback"
	clientID := f.register(redirect)
	for _, tc := range []struct {
		name, key, val, want string
	}{
		{"plain PKCE", "code_challenge_method", "plain", "invalid_request"},
		{"missing PKCE", "code_challenge", "", "invalid_request"},
		{"missing resource", "resource", "", "invalid_target"},
		{"wrong resource", "resource", oauthBase + "/t/beta/mcp", "invalid_target"},
		{"root resource", "resource", oauthBase + "/mcp", "invalid_target"},
		{"implicit", "response_type", "token", "unsupported_response_type"},
		{"scope", "scope", "repo", "invalid_scope"},
	} {
		p := authParams(clientID, redirect)
		if tc.val == "" {
			p.Del(tc.key)
		} else {
			p.Set(tc.key, tc.val)
		}
		// Shown to the person with the OAuth error code, never redirected
		// before the consent page was answered (no open redirector).
		rec, _ := f.authorize(p, f.cookie, "")
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Location") != "" || !strings.Contains(rec.Body.String(), "(OAuth error "+tc.want+")") {
			t.Errorf("%s: %d Location=%q, want a 400 page naming %s:\n%s", tc.name, rec.Code, rec.Header().Get("Location"), tc.want, rec.Body)
		}
	}
	// Unregistered redirect URIs and unknown clients are never redirected to.
	for name, p := range map[string]url.Values{
		"wrong redirect":   authParams(clientID, "https://evil.example.com/cb"),
		"other path":       authParams(clientID, "http://127.0.0.1/other"),
		"unknown client":   authParams("cld_unknown", redirect),
		"missing client":   authParams("", redirect),
		"missing redirect": authParams(clientID, ""),
	} {
		rec, _ := f.authorize(p, f.cookie, "approve")
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Location") != "" {
			t.Errorf("%s: %d Location=%q, want a 400 page", name, rec.Code, rec.Header().Get("Location"))
		}
	}
	// Break-glass sessions can never authorize.
	bg := f.signIn(f.m.TenantID, f.m.UserID, true)
	rec, _ := f.authorize(authParams(clientID, redirect), bg, "")
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "Break-glass") {
		t.Fatalf("break-glass authorize: %d", rec.Code)
	}
	form := authParams(clientID, redirect)
	form.Set("decision", "approve")
	post := httptest.NewRequest(http.MethodPost, "/t/acme/oauth/authorize", strings.NewReader(form.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.AddCookie(bg)
	if rec := f.do(post); rec.Code != http.StatusForbidden {
		t.Fatalf("break-glass approve: %d", rec.Code)
	}
	// A cross-site consent POST is refused.
	post = httptest.NewRequest(http.MethodPost, "/t/acme/oauth/authorize", strings.NewReader(form.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.Header.Set("Sec-Fetch-Site", "cross-site")
	post.AddCookie(f.cookie)
	if rec := f.do(post); rec.Code != http.StatusForbidden || rec.Header().Get("Location") != "" {
		t.Fatalf("cross-site consent: %d", rec.Code)
	}
}

func TestOAuthTokenEndpoint(t *testing.T) {
	f := newOAuthFixture(t, nil)
	const redirect = "http://127.0.0.1/callback"
	clientID := f.register(redirect)
	newCode := func() string {
		_, q := f.authorize(authParams(clientID, redirect), f.cookie, "approve")
		return q.Get("code")
	}
	for _, tc := range []struct {
		name string
		form func(code string) url.Values
		want string
	}{
		{"wrong verifier", func(c string) url.Values { return codeForm(clientID, c, redirect, strings.Repeat("x", 50)) }, "invalid_grant"},
		{"missing verifier", func(c string) url.Values { return codeForm(clientID, c, redirect, "") }, "invalid_request"},
		{"wrong redirect", func(c string) url.Values { return codeForm(clientID, c, "http://127.0.0.1/other", verifier) }, "invalid_grant"},
		{"other client", func(c string) url.Values { return codeForm(f.register(redirect), c, redirect, verifier) }, "invalid_grant"},
		{"wrong resource", func(c string) url.Values {
			v := codeForm(clientID, c, redirect, verifier)
			v.Set("resource", oauthBase+"/mcp")
			return v
		}, "invalid_target"},
		{"unknown code", func(string) url.Values { return codeForm(clientID, "clc_"+strings.Repeat("A", 43), redirect, verifier) }, "invalid_grant"},
		{"grant type", func(c string) url.Values {
			v := codeForm(clientID, c, redirect, verifier)
			v.Set("grant_type", "password")
			return v
		}, "unsupported_grant_type"},
	} {
		a := f.token(tc.form(newCode()))
		if a.Status != 400 || a.Error != tc.want || a.AccessToken != "" {
			t.Errorf("%s: %d %q, want 400 %s", tc.name, a.Status, a.Error, tc.want)
		}
	}
	// A code is burnt at its first presentation: a failed attempt cannot be retried.
	code := newCode()
	f.token(codeForm(clientID, code, redirect, strings.Repeat("x", 50)))
	if a := f.token(codeForm(clientID, code, redirect, verifier)); a.Error != "invalid_grant" {
		t.Fatalf("retry after a wrong verifier: %+v", a)
	}

	// A client_id the organisation never saw is invalid_client (401),
	// for either grant, and does not burn the code it presents.
	code = newCode()
	for _, form := range []url.Values{
		codeForm("never-registered", code, redirect, verifier),
		{"grant_type": {"refresh_token"}, "client_id": {"https://clients.example/unknown.json"}, "refresh_token": {"clr_" + strings.Repeat("A", 43)}},
	} {
		if a := f.token(form); a.Status != 401 || a.Error != "invalid_client" || a.AccessToken != "" {
			t.Errorf("unknown client: %d %q", a.Status, a.Error)
		}
	}
	if a := f.token(codeForm(clientID, code, redirect, verifier)); a.Status != 200 {
		t.Fatalf("the code after an unknown client presented it: %+v", a)
	}

	// A registration that passed its unused expiry after it was given a
	// code (and is not deleted yet) still exchanges the code: it is known.
	late := f.register(redirect)
	_, q := f.authorize(authParams(late, redirect), f.cookie, "approve")
	if _, err := f.env.Admin.Pool.Exec(context.Background(), `UPDATE oauth_clients SET expires_at = now() - interval '1 second'
		WHERE tenant_id = $1 AND client_id = $2`, f.m.TenantID, late); err != nil {
		t.Fatal(err)
	}
	if a := f.token(codeForm(late, q.Get("code"), redirect, verifier)); a.Status != 200 {
		t.Errorf("code of a registration that expired after authorizing: %d %q", a.Status, a.Error)
	}

	// Code reuse: the second use fails and revokes what the first issued.
	code = newCode()
	first := f.token(codeForm(clientID, code, redirect, verifier))
	if first.Status != 200 {
		t.Fatalf("first use: %+v", first)
	}
	if st, _ := f.mcpCall("/t/acme/mcp", first.AccessToken); st != 200 {
		t.Fatalf("first token: %d", st)
	}
	if a := f.token(codeForm(clientID, code, redirect, verifier)); a.Error != "invalid_grant" {
		t.Fatalf("second use: %+v", a)
	}
	if st, _ := f.mcpCall("/t/acme/mcp", first.AccessToken); st != 401 {
		t.Fatalf("token of a reused code: %d, want 401", st)
	}
	if a := f.token(url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {first.RefreshToken}}); a.Error != "invalid_grant" {
		t.Fatalf("refresh of a reused code's grant: %+v", a)
	}
	f.wantAudit("oauth.code_reused")

	// Expired code.
	code = newCode()
	f.exec(`UPDATE oauth_codes SET expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND used_at IS NULL`)
	if a := f.token(codeForm(clientID, code, redirect, verifier)); a.Error != "invalid_grant" {
		t.Fatalf("expired code: %+v", a)
	}
}

func (f *oauthFixture) exec(sql string) {
	f.t.Helper()
	if _, err := f.env.Admin.Pool.Exec(context.Background(), sql, f.m.TenantID); err != nil {
		f.t.Fatal(err)
	}
}

func TestOAuthRefreshRotationAndReuse(t *testing.T) {
	f := newOAuthFixture(t, nil)
	clientID, a := f.connect()
	refresh := func(rt string) tokenAnswer {
		return f.token(url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {rt}})
	}
	b := refresh(a.RefreshToken)
	if b.Status != 200 || b.RefreshToken == a.RefreshToken || b.AccessToken == a.AccessToken {
		t.Fatalf("rotation: %+v", b)
	}
	if st, _ := f.mcpCall("/t/acme/mcp", b.AccessToken); st != 200 {
		t.Fatalf("rotated access token: %d", st)
	}
	// Another client cannot use it.
	if x := f.token(url.Values{"grant_type": {"refresh_token"}, "client_id": {f.register("http://127.0.0.1/cb")}, "refresh_token": {b.RefreshToken}}); x.Error != "invalid_grant" {
		t.Fatalf("other client refresh: %+v", x)
	}
	// Reuse of the old refresh token revokes the whole grant.
	if x := refresh(a.RefreshToken); x.Error != "invalid_grant" {
		t.Fatalf("reuse: %+v", x)
	}
	for _, tok := range []string{a.AccessToken, b.AccessToken} {
		if st, _ := f.mcpCall("/t/acme/mcp", tok); st != 401 {
			t.Fatalf("access token after reuse detection: %d, want 401", st)
		}
	}
	if x := refresh(b.RefreshToken); x.Error != "invalid_grant" {
		t.Fatalf("newest refresh token after reuse detection: %+v", x)
	}
	f.wantAudit("oauth.refresh_reused")
}

func TestOAuthExpiry(t *testing.T) {
	f := newOAuthFixture(t, nil)
	clientID, a := f.connect()
	f.exec(`UPDATE mcp_tokens SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND oauth_grant_id IS NOT NULL`)
	if st, _ := f.mcpCall("/t/acme/mcp", a.AccessToken); st != 401 {
		t.Fatalf("expired access token: %d", st)
	}
	// The refresh token still renews access until the grant ends...
	b := f.token(url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {a.RefreshToken}})
	if b.Status != 200 {
		t.Fatalf("refresh after access expiry: %+v", b)
	}
	// ...and not after.
	f.exec(`UPDATE oauth_grants SET created_at = now() - interval '91 days', expires_at = now() - interval '1 day' WHERE tenant_id = $1`)
	if x := f.token(url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {b.RefreshToken}}); x.Error != "invalid_grant" {
		t.Fatalf("refresh after grant expiry: %+v", x)
	}
}

func TestOAuthRevocation(t *testing.T) {
	f := newOAuthFixture(t, nil)
	// RFC 7009 with the refresh token.
	clientID, a := f.connect()
	revoke := func(form url.Values) int {
		req := httptest.NewRequest(http.MethodPost, "/t/acme/oauth/revoke", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return f.do(req).Code
	}
	// Another client's revocation changes nothing; an unknown token answers 200 too.
	if st := revoke(url.Values{"token": {a.RefreshToken}, "client_id": {"cld_other"}}); st != 200 {
		t.Fatalf("revoke by another client: %d", st)
	}
	if st, _ := f.mcpCall("/t/acme/mcp", a.AccessToken); st != 200 {
		t.Fatalf("another client revoked the grant: %d", st)
	}
	if st := revoke(url.Values{"token": {a.RefreshToken}, "client_id": {clientID}, "token_type_hint": {"refresh_token"}}); st != 200 {
		t.Fatalf("revoke: %d", st)
	}
	if st, _ := f.mcpCall("/t/acme/mcp", a.AccessToken); st != 401 {
		t.Fatalf("access token after RFC 7009 revocation: %d", st)
	}
	if st := revoke(url.Values{"client_id": {clientID}}); st != 400 {
		t.Fatalf("revoke without token: %d", st)
	}
	// A personal access token posted to the endpoint is not revoked there.
	if st := revoke(url.Values{"token": {f.m.Secret}, "client_id": {clientID}}); st != 200 {
		t.Fatal(st)
	}
	if st, _ := f.mcpCall("/mcp", f.m.Secret); st != 200 {
		t.Fatalf("PAT after revocation endpoint: %d", st)
	}
	f.wantAudit("oauth.revoked")

	// On the MCP access page.
	_, b := f.connect()
	var gid string
	if err := f.env.Admin.Pool.QueryRow(context.Background(), `SELECT id::text FROM oauth_grants WHERE tenant_id = $1 AND revoked_at IS NULL`, f.m.TenantID).Scan(&gid); err != nil {
		t.Fatal(err)
	}
	post := httptest.NewRequest(http.MethodPost, "/t/acme/mcp/grants/"+gid+"/revoke", nil)
	post.AddCookie(f.cookie)
	if rec := f.do(post); rec.Code != http.StatusSeeOther {
		t.Fatalf("page revoke: %d", rec.Code)
	}
	if st, _ := f.mcpCall("/t/acme/mcp", b.AccessToken); st != 401 {
		t.Fatalf("access token after page revocation: %d", st)
	}
}

func TestOAuthSwitchedOffByTenantAdmin(t *testing.T) {
	f := newOAuthFixture(t, nil)
	clientID, a := f.connect()
	if err := f.env.App.InTenant(context.Background(), f.m.TenantID, func(tx *postgres.Tx) error {
		_, err := tx.SetOAuthEnabled(context.Background(), false, postgres.Actor{Label: "test"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.mcpCall("/t/acme/mcp", a.AccessToken); st != 401 {
		t.Fatalf("OAuth token with OAuth off: %d", st)
	}
	for _, p := range []string{"/mcp", "/t/acme/mcp"} {
		if st, _ := f.mcpCall(p, f.m.Secret); st != 200 {
			t.Fatalf("PAT at %s with OAuth off: %d", p, st)
		}
	}
	if x := f.token(url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {a.RefreshToken}}); x.Error != "invalid_grant" {
		t.Fatalf("refresh with OAuth off: %+v", x)
	}
	if rec, _ := f.authorize(authParams(clientID, "http://127.0.0.1/callback"), f.cookie, ""); rec.Code != http.StatusForbidden ||
		rec.Header().Get("Location") != "" || !strings.Contains(rec.Body.String(), "switched OAuth clients off") {
		t.Fatalf("authorize with OAuth off: %d Location=%q", rec.Code, rec.Header().Get("Location"))
	}
	f.wantAudit("oauth.switched")
}

func TestOAuthTokenOfOneTenantAtAnother(t *testing.T) {
	f := newOAuthFixture(t, nil)
	_, a := f.connect()
	ctx := context.Background()
	if _, err := f.env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "beta", Name: "Beta", MCPEnabled: true}, "test"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/t/beta/mcp", "/mcp", "/t/nosuch/mcp"} {
		if st, _ := f.mcpCall(p, a.AccessToken); st != 401 {
			t.Errorf("acme's OAuth token at %s: %d, want 401", p, st)
		}
	}
	if _, out := f.mcpCall("/t/nosuch/mcp", a.AccessToken); strings.Contains(out, "resource_metadata") {
		t.Errorf("an unknown tenant's 401 points to metadata: %s", out)
	}
	if st, _ := f.mcpCall("/t/beta/mcp", f.m.Secret); st != 401 {
		t.Errorf("acme's PAT at beta's endpoint: %d, want 401", st)
	}
	// The auth function itself refuses a token at another resource.
	if _, found, err := f.env.App.AuthToken(ctx, tokens.Hash(a.AccessToken), oauthBase+"/t/beta/mcp"); err != nil || found {
		t.Fatalf("auth_token at another resource: found=%v err=%v", found, err)
	}
	if _, found, err := f.env.App.AuthToken(ctx, tokens.Hash(a.AccessToken), oauthBase+"/t/acme/mcp"); err != nil || !found {
		t.Fatalf("auth_token at its resource: found=%v err=%v", found, err)
	}
}

func TestOAuthDiscovery(t *testing.T) {
	f := newOAuthFixture(t, nil)
	get := func(p string) (int, map[string]any) {
		rec := f.do(httptest.NewRequest(http.MethodGet, p, nil))
		var m map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &m)
		return rec.Code, m
	}
	st, prm := get("/.well-known/oauth-protected-resource/t/acme/mcp")
	if st != 200 || prm["resource"] != oauthBase+"/t/acme/mcp" || !jsonHas(prm["authorization_servers"], oauthBase+"/t/acme") ||
		!jsonHas(prm["scopes_supported"], "mcp:read") || !jsonHas(prm["bearer_methods_supported"], "header") {
		t.Fatalf("PRM: %d %v", st, prm)
	}
	for _, p := range []string{"/.well-known/oauth-authorization-server/t/acme", "/.well-known/openid-configuration/t/acme", "/t/acme/.well-known/oauth-authorization-server"} {
		st, m := get(p)
		if st != 200 || m["issuer"] != oauthBase+"/t/acme" || !jsonHas(m["code_challenge_methods_supported"], "S256") || len(m["code_challenge_methods_supported"].([]any)) != 1 ||
			m["client_id_metadata_document_supported"] != true || m["authorization_response_iss_parameter_supported"] != true ||
			m["registration_endpoint"] != oauthBase+"/t/acme/oauth/register" || m["revocation_endpoint"] != oauthBase+"/t/acme/oauth/revoke" {
			t.Fatalf("%s: %d %v", p, st, m)
		}
	}
	if st, _ := get("/.well-known/oauth-authorization-server/t/nosuch"); st != 404 {
		t.Fatalf("unknown tenant metadata: %d", st)
	}
	// The root endpoint advertises no OAuth: no root metadata, no resource_metadata.
	if st, _ := get("/.well-known/oauth-protected-resource/mcp"); st != 404 {
		t.Fatalf("root PRM: %d", st)
	}
	if _, out := f.mcpCall("/mcp", "clt_bad"); strings.Contains(out, "resource_metadata") {
		t.Fatalf("root 401 names resource metadata: %s", out)
	}
	// The tenant endpoint's 401 carries its own resource metadata.
	if st, out := f.mcpCall("/t/acme/mcp", "clt_bad"); st != 401 || !strings.Contains(out, `resource_metadata="`+oauthBase+`/.well-known/oauth-protected-resource/t/acme/mcp"`) {
		t.Fatalf("tenant 401: %d %s", st, out)
	}
	// A stream GET of the tenant endpoint is a 405, not the HTML page.
	req := httptest.NewRequest(http.MethodGet, "/t/acme/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	if rec := f.do(req); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("stream GET: %d", rec.Code)
	}
}

func jsonHas(v any, want string) bool {
	l, _ := v.([]any)
	for _, x := range l {
		if x == want {
			return true
		}
	}
	return false
}

func TestOAuthDisabledByOperator(t *testing.T) {
	f := newOAuthFixture(t, func(c *Config) { c.OAuth = OAuthConfig{} })
	for _, p := range []string{"/.well-known/oauth-protected-resource/t/acme/mcp", "/.well-known/oauth-authorization-server/t/acme",
		"/.well-known/openid-configuration/t/acme", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		if rec := f.do(httptest.NewRequest(http.MethodGet, p, nil)); rec.Code != 404 {
			t.Errorf("%s: %d with OAuth disabled", p, rec.Code)
		}
	}
	for _, p := range []string{"/mcp", "/t/acme/mcp"} {
		if st, out := f.mcpCall(p, "clt_bad"); st != 401 || strings.Contains(out, "resource_metadata") {
			t.Errorf("%s 401 with OAuth disabled: %d %s", p, st, out)
		}
		if st, _ := f.mcpCall(p, f.m.Secret); st != 200 {
			t.Errorf("PAT at %s with OAuth disabled: %d", p, st)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/t/acme/oauth/register", strings.NewReader(`{}`))
	if rec := f.do(req); rec.Code == http.StatusCreated {
		t.Error("registration open with OAuth disabled")
	}
}

func TestOAuthActiveLimitCountsGrants(t *testing.T) {
	f := newOAuthFixture(t, nil)
	// The member has one PAT; 9 grants make 10.
	for i := 0; i < 9; i++ {
		f.connect()
	}
	const redirect = "http://127.0.0.1/callback"
	clientID := f.register(redirect)
	rec, _ := f.authorize(authParams(clientID, redirect), f.cookie, "")
	if !strings.Contains(rec.Body.String(), "the most allowed") || strings.Contains(rec.Body.String(), `value="approve"`) {
		t.Fatalf("consent at the limit offers approval: %s", rec.Body)
	}
	err := f.env.App.InTenant(context.Background(), f.m.TenantID, func(tx *postgres.Tx) error {
		exp, _ := tokens.ExpiresAt(time.Now(), 30)
		_, err := tx.CreateToken(context.Background(), postgres.NewToken{UserID: f.m.UserID, Name: "x", Secret: tokens.Generate(), ExpiresAt: exp}, time.Now(), postgres.Actor{Label: "test"})
		return err
	})
	if codelotse.ErrorCode(err) != codelotse.Conflict {
		t.Fatalf("11th entry as a PAT: %v, want conflict", err)
	}
}

func TestOAuthClientIDMetadataDocument(t *testing.T) {
	var docURL string
	var fetches atomic.Int32
	cimd := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big.json" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"client_id":"` + strings.Repeat("x", 6000) + `"}`))
			return
		}
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=60")
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": docURL, "client_name": "Doc Client", "redirect_uris": []string{"http://127.0.0.1/callback"},
			"grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none"})
	}))
	defer cimd.Close()
	docURL = cimd.URL + "/client.json"
	pool := x509.NewCertPool()
	pool.AddCert(cimd.Certificate())

	// Without an allowance the loopback document is refused (SSRF).
	strict := newOAuthFixture(t, func(c *Config) {
		c.OAuth.MetadataClient = safehttp.NewClient(safehttp.Options{RootCAs: pool})
	})
	rec, _ := strict.authorize(authParams(docURL, "http://127.0.0.1/callback"), strict.cookie, "")
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "does not fetch from") {
		t.Fatalf("loopback CIMD without allowance: %d %s", rec.Code, rec.Body)
	}

	f := newOAuthFixture(t, func(c *Config) {
		c.OAuth.MetadataClient = safehttp.NewClient(safehttp.Options{RootCAs: pool, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	})
	rec, _ = f.authorize(authParams(docURL, "http://127.0.0.1/callback"), f.cookie, "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "Doc Client") || !strings.Contains(rec.Body.String(), "127.0.0.1") {
		t.Fatalf("CIMD consent: %d %s", rec.Code, rec.Body)
	}
	// HTTP caching is honoured: max-age=60 means no second fetch.
	if n := fetches.Load(); n != 1 {
		t.Fatalf("document fetched %d times, want once (cached for max-age)", n)
	}
	// A document over the 5 KiB cap is refused.
	if rec, _ := f.authorize(authParams(cimd.URL+"/big.json", "http://127.0.0.1/callback"), f.cookie, ""); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "5 KiB") {
		t.Fatalf("oversized document: %d %s", rec.Code, rec.Body)
	}
	// The redirect URI must be one the document lists.
	if rec, _ := f.authorize(authParams(docURL, "https://evil.example.com/cb"), f.cookie, ""); rec.Code != http.StatusBadRequest {
		t.Fatalf("unlisted redirect: %d", rec.Code)
	}
	_, q := f.authorize(authParams(docURL, "http://127.0.0.1:4444/callback"), f.cookie, "approve")
	a := f.token(codeForm(docURL, q.Get("code"), "http://127.0.0.1:4444/callback", verifier))
	if a.Status != 200 {
		t.Fatalf("CIMD token: %+v", a)
	}
	if st, out := f.mcpCall("/t/acme/mcp", a.AccessToken); st != 200 || !strings.Contains(out, "acme/api") {
		t.Fatalf("CIMD client call: %d %s", st, out)
	}
	// A non-https client_id is no metadata document.
	if rec, _ := f.authorize(authParams("http://127.0.0.1/client.json", "http://127.0.0.1/callback"), f.cookie, ""); rec.Code != http.StatusBadRequest {
		t.Fatalf("http client_id: %d", rec.Code)
	}
}

func TestOAuthAdminPage(t *testing.T) {
	f := newOAuthFixture(t, nil)
	f.connect()
	admin := f.signIn(f.m.TenantID, f.m.UserID, true) // break-glass acts as a tenant admin
	page := httptest.NewRequest(http.MethodGet, "/t/acme/admin", nil)
	page.AddCookie(admin)
	body := f.do(page).Body.String()
	if !strings.Contains(body, "Test Client — via OAuth") || !strings.Contains(body, "dev@acme.test") || !strings.Contains(body, "Switch OAuth clients off") {
		t.Fatalf("admin page lacks the grant or the switch: %s", body)
	}
	post := func(path string, form url.Values) int {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(admin)
		return f.do(req).Code
	}
	_, a := f.connect()
	if st := post("/t/acme/admin/oauth", url.Values{"enabled": {"off"}}); st != http.StatusSeeOther {
		t.Fatalf("switch off: %d", st)
	}
	if st, _ := f.mcpCall("/t/acme/mcp", a.AccessToken); st != 401 {
		t.Fatalf("after the admin switched OAuth off: %d", st)
	}
	if st := post("/t/acme/admin/oauth", url.Values{"enabled": {"on"}}); st != http.StatusSeeOther {
		t.Fatalf("switch on: %d", st)
	}
	if st, _ := f.mcpCall("/t/acme/mcp", a.AccessToken); st != 200 {
		t.Fatalf("after the admin switched OAuth on again: %d", st)
	}
	var gid string
	if err := f.env.Admin.Pool.QueryRow(context.Background(), `SELECT oauth_grant_id::text FROM mcp_tokens WHERE tenant_id = $1 AND token_hash = $2`, f.m.TenantID, tokens.Hash(a.AccessToken)).Scan(&gid); err != nil {
		t.Fatal(err)
	}
	if st := post("/t/acme/admin/grants/"+gid+"/revoke", nil); st != http.StatusSeeOther {
		t.Fatalf("admin revoke: %d", st)
	}
	if st, _ := f.mcpCall("/t/acme/mcp", a.AccessToken); st != 401 {
		t.Fatalf("after the admin revoked the grant: %d", st)
	}
	// An unknown grant is a clear 404, not a 500.
	if st := post("/t/acme/mcp/grants/00000000-0000-0000-0000-000000000000/revoke", nil); st != http.StatusNotFound {
		t.Fatalf("revoking an unknown grant: %d", st)
	}
}

func TestOAuthRegistrationRateLimit(t *testing.T) {
	f := newOAuthFixture(t, func(c *Config) {
		c.Limiter = ratelimit.NewMemory()
		c.OAuth.RegisterLimit = ratelimit.Rule{Limit: 2, Period: time.Hour}
	})
	f.register("http://127.0.0.1/cb")
	f.register("http://127.0.0.1/cb")
	rec := f.do(httptest.NewRequest(http.MethodPost, "/t/acme/oauth/register", strings.NewReader(`{"redirect_uris":["http://127.0.0.1/cb"]}`)))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("third registration: %d", rec.Code)
	}
	// Bad registrations are clear 400s and store nothing.
	g := newOAuthFixture(t, nil)
	for _, body := range []string{`{`, `{"redirect_uris":["http://evil.example.com/cb"]}`, `{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"client_secret_basic"}`} {
		if rec := g.do(httptest.NewRequest(http.MethodPost, "/t/acme/oauth/register", strings.NewReader(body))); rec.Code != http.StatusBadRequest {
			t.Errorf("registration %s: %d", body, rec.Code)
		}
	}
	var n int
	if err := g.env.Admin.Pool.QueryRow(context.Background(), `SELECT count(*) FROM oauth_clients WHERE tenant_id = $1`, g.m.TenantID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("clients stored after bad registrations: %d %v", n, err)
	}
}

func TestOAuthUnusedRegistrationExpires(t *testing.T) {
	f := newOAuthFixture(t, nil)
	const redirect = "http://127.0.0.1/callback"
	unused, used := f.register(redirect), f.register(redirect)
	if rec, _ := f.authorize(authParams(used, redirect), f.cookie, "approve"); rec.Code != http.StatusSeeOther {
		t.Fatalf("authorize: %d", rec.Code)
	}
	_, q := f.authorize(authParams(used, redirect), f.cookie, "approve")
	if a := f.token(codeForm(used, q.Get("code"), redirect, verifier)); a.Status != 200 {
		t.Fatalf("token: %+v", a)
	}
	// 31 days later: the unused registration is gone, the used one was extended.
	f.exec(`UPDATE oauth_clients SET expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND last_used_at IS NULL`)
	if rec, _ := f.authorize(authParams(unused, redirect), f.cookie, ""); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "expired unused") {
		t.Fatalf("expired registration: %d %s", rec.Code, rec.Body)
	}
	if rec, _ := f.authorize(authParams(used, redirect), f.cookie, ""); rec.Code != http.StatusOK {
		t.Fatalf("used registration: %d", rec.Code)
	}
	// The next registration sweeps expired ones away.
	f.register(redirect)
	var n int
	if err := f.env.Admin.Pool.QueryRow(context.Background(), `SELECT count(*) FROM oauth_clients WHERE tenant_id = $1 AND client_id = $2`, f.m.TenantID, unused).Scan(&n); err != nil || n != 0 {
		t.Fatalf("expired registration still stored: %d %v", n, err)
	}
}
