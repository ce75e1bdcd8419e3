package httpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/postgres"
)

// Found by a black-box probe of the pages and the OAuth server: each of
// these was a 500, a 503, an HTML answer to an OAuth client, or a change
// made from a malformed request.

// pageForm is a same-origin POST of an admin's page form.
func pageForm(path, contentType string, body []byte, cookie *http.Cookie) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Origin", "http://127.0.0.1:8080")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return req
}

func multipartBody(t *testing.T, fields map[string]string) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for k, v := range fields {
		if err := w.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.FormDataContentType()
}

// TestEveryFormEncodingIsChecked: the NUL / invalid UTF-8 check read only
// bodies whose Content-Type began with the lowercase form type; multipart
// bodies and "Application/x-www-form-urlencoded" (media types are
// case-insensitive, and Go's form parsing reads both) reached PostgreSQL,
// which refuses NUL in text: a 500. Nothing may be written.
func TestEveryFormEncodingIsChecked(t *testing.T) {
	srv, env, tid, cookie := webFixture(t, DefaultLimits)
	mp, mpType := multipartBody(t, map[string]string{"issuer": "https://idp.example.com", "client_id": "a\x00b", "client_secret": "s"})
	for _, req := range []*http.Request{
		pageForm("/t/acme/admin/idp", mpType, mp, cookie),
		pageForm("/t/acme/admin/idp", "Application/X-WWW-Form-Urlencoded", []byte("issuer=https://idp.example.com&client_id=a%00b&client_secret=s"), cookie),
		pageForm("/t/acme/admin/idp", "application/x-www-form-urlencoded; charset=UTF-8", []byte("issuer=https://idp.example.com&client_id=a%FFb&client_secret=s"), cookie),
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %.200s, want 400", req.Header.Get("Content-Type"), rec.Code, rec.Body)
		}
	}
	err := env.App.InTenant(context.Background(), tid, func(tx *postgres.Tx) error {
		_, err := tx.IdentityProviderByIssuer(context.Background(), "")
		return err
	})
	if err == nil {
		t.Error("a refused form saved an identity provider")
	}
}

// TestOAuthClientEndpointsAnswerJSON: the token, revocation and
// registration endpoints answer a malformed body with RFC 6749's JSON
// error, never a page (nor a 503 from a database that refused NUL).
func TestOAuthClientEndpointsAnswerJSON(t *testing.T) {
	f := newOAuthFixture(t, nil)
	big := "client_id=x&grant_type=refresh_token&refresh_token=" + strings.Repeat("A", 70<<10)
	mp, mpType := multipartBody(t, map[string]string{"grant_type": "refresh_token", "client_id": "a\x00b"})
	for _, tc := range []struct {
		name, path, ctype, body string
	}{
		{"NUL in a token request", "/t/acme/oauth/token", "application/x-www-form-urlencoded", "grant_type=refresh_token&client_id=a%00b&refresh_token=x"},
		{"invalid UTF-8 in a token request", "/t/acme/oauth/token", "application/x-www-form-urlencoded", "grant_type=refresh_token&client_id=a%FFb&refresh_token=x"},
		{"a token request over 64 KiB", "/t/acme/oauth/token", "application/x-www-form-urlencoded", big},
		{"a multipart token request", "/t/acme/oauth/token", mpType, string(mp)},
		{"NUL in a revocation, media type in capitals", "/t/acme/oauth/revoke", "Application/x-www-form-urlencoded", "token=clr_" + strings.Repeat("A", 43) + "&client_id=a%00b"},
		{"NUL in the query of a registration", "/t/acme/oauth/register?x=%00", "application/json", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.ctype)
			rec := f.do(req)
			var out struct {
				Error string `json:"error"`
			}
			if rec.Code != http.StatusBadRequest || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") ||
				json.Unmarshal(rec.Body.Bytes(), &out) != nil || out.Error != "invalid_request" {
				t.Errorf("%d %q %.200s, want 400 JSON invalid_request", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
		})
	}
}

// TestAdminCorrectsTheIssuer: saving the provider form with another issuer
// corrects the tenant's one provider (a typo); it used to add a second one,
// after which nobody could sign in and the page could not save either. Once
// someone has signed in through the provider, another issuer is refused
// with nothing changed: their accounts are subjects of that issuer.
func TestAdminCorrectsTheIssuer(t *testing.T) {
	srv, env, tid, cookie := webFixture(t, DefaultLimits)
	ctx := context.Background()
	save := func(issuer string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, pageForm("/t/acme/admin/idp", "application/x-www-form-urlencoded",
			[]byte("issuer="+issuer+"&client_id=abc&client_secret=s&enabled=true"), cookie))
		return rec
	}
	provider := func() postgres.IdentityProvider {
		t.Helper()
		var p postgres.IdentityProvider
		if err := env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
			var err error
			p, err = tx.IdentityProviderByIssuer(ctx, "")
			return err
		}); err != nil {
			t.Fatalf("the tenant's provider: %v", err)
		}
		return p
	}
	if rec := save("https://login.exmaple.com"); rec.Code != http.StatusSeeOther {
		t.Fatalf("first save: %d %.300s", rec.Code, rec.Body)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, pageForm("/t/acme/admin/mappings", "application/x-www-form-urlencoded", []byte("group=devs&role=member"), cookie))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("mapping: %d %.300s", rec.Code, rec.Body)
	}
	first := provider()
	if rec := save("https://login.example.com"); rec.Code != http.StatusSeeOther {
		t.Fatalf("corrected save: %d %.300s", rec.Code, rec.Body)
	}
	p := provider() // fails with two providers
	if p.ID != first.ID || p.Issuer != "https://login.example.com" || p.ClientSecret != "s" {
		t.Errorf("after the correction: %+v, want provider %s with the new issuer", p, first.ID)
	}
	if rec := get(srv, "/t/acme/admin", cookie); !strings.Contains(rec.Body.String(), "devs") || !strings.Contains(rec.Body.String(), "https://login.example.com") {
		t.Errorf("the admin page lost the provider or its mapping: %.500s", rec.Body)
	}

	// Someone signs in through it: another issuer is refused.
	if _, err := env.Admin.Pool.Exec(ctx, `INSERT INTO users (tenant_id, email, idp_id, idp_subject) VALUES ($1, 'ann@acme.test', $2, 'sub-1')`, tid, p.ID); err != nil {
		t.Fatal(err)
	}
	rec = save("https://other.example.com")
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "signed in through") {
		t.Errorf("changing a provider in use: %d %.300s", rec.Code, rec.Body)
	}
	if p := provider(); p.Issuer != "https://login.example.com" {
		t.Errorf("a refused change was saved: %+v", p)
	}
}

// TestAdminSwitchesNeedAValue: a switch's form field must be one of its two
// values; "maybe" switched MCP off.
func TestAdminSwitchesNeedAValue(t *testing.T) {
	srv, env, tid, cookie := webFixture(t, DefaultLimits)
	ctx := context.Background()
	if err := env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		_, err := tx.SetMCPEnabled(ctx, true, postgres.Actor{Label: "test"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, pageForm("/t/acme/admin/mcp", "application/x-www-form-urlencoded", []byte("enabled=maybe"), cookie))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("enabled=maybe: %d %.300s", rec.Code, rec.Body)
	}
	var on bool
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT coalesce((settings #>> '{mcp,enabled}')::boolean, false) FROM tenant_settings WHERE tenant_id = $1`, tid).Scan(&on); err != nil || !on {
		t.Errorf("MCP after a malformed switch: on=%v err=%v", on, err)
	}
	for _, key := range []string{"grant-revoked", "oauth-on", "oauth-off"} {
		if rec := get(srv, "/t/acme/admin?done="+key, cookie); !strings.Contains(rec.Body.String(), adminNotices[key]) || adminNotices[key] == "" {
			t.Errorf("notice %s is not shown", key)
		}
	}
}

// TestTokenFormExpiryZero: 0 days is out of range (1–90) on the page as in
// cltctl; it made a token of the default 30 days.
func TestTokenFormExpiryZero(t *testing.T) {
	srv, env, tid, cookie := webFixture(t, DefaultLimits)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, pageForm("/t/acme/mcp/tokens", "application/x-www-form-urlencoded", []byte("name=laptop&expires_days=0"), cookie))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "from 1 to 90") {
		t.Errorf("expires_days=0: %d %.300s", rec.Code, rec.Body)
	}
	var n int
	if err := env.Admin.Pool.QueryRow(context.Background(), `SELECT count(*) FROM mcp_tokens WHERE tenant_id = $1`, tid).Scan(&n); err != nil || n != 0 {
		t.Errorf("tokens after a refused form: %d (%v)", n, err)
	}
}

// TestTokenEndpointReadsTheBody: parameters in the URL are refused (they
// were read as if in the body), and a refusal at code exchange uses the
// token endpoint's own error codes (access_denied is not one of them).
func TestTokenEndpointReadsTheBody(t *testing.T) {
	f := newOAuthFixture(t, nil)
	const redirect = "http://127.0.0.1/callback"
	clientID := f.register(redirect)
	_, q := f.authorize(authParams(clientID, redirect), f.cookie, "approve")
	form := codeForm(clientID, q.Get("code"), redirect, verifier)
	req := httptest.NewRequest(http.MethodPost, "/t/acme/oauth/token?"+form.Encode(), strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := f.do(req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "invalid_request") {
		t.Errorf("parameters in the URL: %d %s", rec.Code, rec.Body)
	}

	_, q = f.authorize(authParams(clientID, redirect), f.cookie, "approve")
	f.exec(`UPDATE tenant_settings SET settings = jsonb_set(coalesce(settings, '{}'), '{oauth}', '{"enabled": false}') WHERE tenant_id = $1`)
	if a := f.token(codeForm(clientID, q.Get("code"), redirect, verifier)); a.Status != http.StatusBadRequest || a.Error != "invalid_grant" {
		t.Errorf("exchange while OAuth is off: %+v, want 400 invalid_grant", a)
	}
}

// TestHeadIsServedAsGet: HEAD of a GET route answers as GET does, without
// a body (it was a 405 for /healthz and a 404 for the pages).
func TestHeadIsServedAsGet(t *testing.T) {
	srv, _, _, cookie := webFixture(t, DefaultLimits)
	for _, path := range []string{"/healthz", "/", "/t/acme/mcp", "/t/acme/admin"} {
		req := httptest.NewRequest(http.MethodHead, path, nil)
		req.AddCookie(cookie)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		want := get(srv, path, cookie)
		if rec.Code != want.Code || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Errorf("HEAD %s: %d %q with %d bytes; GET: %d %q", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len(), want.Code, want.Header().Get("Content-Type"))
		}
	}
}

// TestWrongMethodIs405: a path that exists for other methods answers 405
// with Allow; the tenant group's catch-all made every such request a 404.
func TestWrongMethodIs405(t *testing.T) {
	f := newOAuthFixture(t, nil)
	f.srv.echo.GET("/t/:slug/test-missing", func(c echo.Context) error { return echo.ErrNotFound })
	f.srv.registered["GET /t/:slug/test-missing"] = true
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, "/t/acme/oauth/token", "POST"},
		{http.MethodPut, "/t/acme/mcp/tokens", "POST"},
		{http.MethodDelete, "/t/acme/admin", "GET, HEAD"},
		{http.MethodGet, "/t/acme/no/such/page", ""},
		// A handler's own "not found" for a route of this method (the
		// route is added below).
		{http.MethodGet, "/t/acme/test-missing", ""},
		{http.MethodGet, "/no/such/page", ""},
	} {
		rec := f.do(httptest.NewRequest(tc.method, tc.path, nil))
		want := http.StatusMethodNotAllowed
		if tc.allow == "" {
			want = http.StatusNotFound
		}
		if rec.Code != want || rec.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want %d Allow %q", tc.method, tc.path, rec.Code, rec.Header().Get("Allow"), want, tc.allow)
		}
	}
}

// TestNoOAuthConnectionWhileMCPIsOff: while the organisation has MCP
// switched off, authorization and code exchange are refused with the
// reason; they issued tokens that every request then refused, and the
// client believed it was connected.
func TestNoOAuthConnectionWhileMCPIsOff(t *testing.T) {
	f := newOAuthFixture(t, nil)
	const redirect = "http://127.0.0.1/callback"
	clientID := f.register(redirect)
	_, q := f.authorize(authParams(clientID, redirect), f.cookie, "approve")
	code := q.Get("code")
	if code == "" {
		t.Fatalf("no code while MCP is on: %v", q)
	}
	f.exec(`UPDATE tenant_settings SET settings = jsonb_set(coalesce(settings, '{}'), '{mcp}', '{"enabled": false}') WHERE tenant_id = $1`)
	if a := f.token(codeForm(clientID, code, redirect, verifier)); a.Status != http.StatusBadRequest || a.Error != "invalid_grant" || a.AccessToken != "" {
		t.Errorf("exchange while MCP is off: %+v, want 400 invalid_grant", a)
	}
	// Shown to the person, not redirected: the consent page was not
	// answered (TestOAuthAuthorizeErrorsAreNoOpenRedirect).
	rec, _ := f.authorize(authParams(clientID, redirect), f.cookie, "")
	if rec.Code != http.StatusForbidden || rec.Header().Get("Location") != "" || !strings.Contains(rec.Body.String(), "switched MCP off") {
		t.Errorf("authorize while MCP is off: %d Location=%q", rec.Code, rec.Header().Get("Location"))
	}
}

// TestNamesStoredBeforeAreShownClean: client and token names stored before
// they were cleaned at registration and creation are cleaned where shown.
func TestNamesStoredBeforeAreShownClean(t *testing.T) {
	f := newOAuthFixture(t, nil)
	const redirect = "http://127.0.0.1/callback"
	clientID := f.register(redirect)
	f.exec(`UPDATE oauth_clients SET name = 'Claude' || chr(8238) || chr(8203) || ' Desktop' WHERE tenant_id = $1`)
	rec, _ := f.authorize(authParams(clientID, redirect), f.cookie, "")
	body := rec.Body.String()
	if !strings.Contains(body, "Authorize Claude Desktop") || strings.Contains(body, "\u202e") {
		t.Errorf("consent page: %d %.400s", rec.Code, body)
	}
	if _, q := f.authorize(authParams(clientID, redirect), f.cookie, "approve"); q.Get("code") != "" {
		f.token(codeForm(clientID, q.Get("code"), redirect, verifier))
	}
	f.exec(`UPDATE mcp_tokens SET name = 'lap' || chr(8238) || 'top' WHERE tenant_id = $1`)
	req := httptest.NewRequest(http.MethodGet, "/t/acme/mcp", nil)
	req.AddCookie(f.cookie)
	page := f.do(req).Body.String()
	if strings.Contains(page, "\u202e") || strings.Contains(page, "\u200b") || !strings.Contains(page, "Claude Desktop") {
		t.Errorf("access page shows the stored characters: %.2000s", page)
	}
}

// TestProviderSettingsAreBounded: the provider form's bounds count
// characters, and cover the scopes (5,001 scopes were saved).
func TestProviderSettingsAreBounded(t *testing.T) {
	srv, _, _, cookie := webFixture(t, DefaultLimits)
	post := func(form string) int {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, pageForm("/t/acme/admin/idp", "application/x-www-form-urlencoded", []byte(form), cookie))
		return rec.Code
	}
	if code := post("issuer=https://idp.example.com/" + strings.Repeat("%C3%A9", 1500) + "&client_id=c&client_secret=s"); code != http.StatusSeeOther {
		t.Errorf("an issuer of 1,524 two-byte characters: %d, want it saved", code)
	}
	if code := post("issuer=https://idp.example.com&client_id=c&client_secret=s&scopes=openid" + strings.Repeat("+x", 30)); code != http.StatusBadRequest {
		t.Errorf("31 scopes: %d, want 400", code)
	}
}
