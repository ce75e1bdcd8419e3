package httpserver

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/ratelimit"
	"github.com/codelotse/codelotse/pkg/safehttp"
)

// cimdFixture serves metadata documents on https at 127.0.0.1 and returns
// an OAuth fixture whose metadata client trusts and may reach it.
func cimdFixture(t *testing.T, h http.HandlerFunc) (*oauthFixture, *httptest.Server) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	f := newOAuthFixture(t, func(c *Config) {
		// The default safehttp client follows redirects: the metadata
		// fetch must refuse them whatever client it is given.
		c.OAuth.MetadataClient = safehttp.NewClient(safehttp.Options{RootCAs: pool, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	})
	return f, srv
}

// writeDocument answers with the metadata document of the URL requested.
func writeDocument(w http.ResponseWriter, r *http.Request, contentType string) {
	if contentType != "" {
		w.Header().Set("Content-Type", contentType)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"client_id": "https://" + r.Host + r.URL.EscapedPath(), "client_name": "Doc Client",
		"redirect_uris": []string{"http://127.0.0.1/callback"}, "token_endpoint_auth_method": "none"})
}

func (f *oauthFixture) clientRows() int {
	f.t.Helper()
	var n int
	if err := f.env.Admin.Pool.QueryRow(context.Background(), `SELECT count(*) FROM oauth_clients WHERE tenant_id = $1`, f.m.TenantID).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// A metadata document is never fetched through a redirect (the CIMD draft:
// the authorization server MUST NOT follow redirects). The client_id's host
// is what the consent page shows as the client's identity; an open
// redirect on that host would otherwise present anyone's document, with its
// own redirect URIs, under it.
func TestOAuthMetadataDocumentNotFetchedThroughRedirects(t *testing.T) {
	var targetFetches atomic.Int32
	f, srv := cimdFixture(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/go": // an open redirect on the client's host
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		case "/moved.json": // a permanently moved document
			http.Redirect(w, r, "/client.json", http.StatusMovedPermanently)
		default:
			targetFetches.Add(1)
			writeDocument(w, r, "application/json")
		}
	})
	for name, clientID := range map[string]string{
		"open redirect": srv.URL + "/go?to=" + url.QueryEscape(srv.URL+"/client.json"),
		"moved":         srv.URL + "/moved.json",
	} {
		rec, _ := f.authorize(authParams(clientID, "http://127.0.0.1/callback"), f.cookie, "")
		body := rec.Body.String()
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Location") != "" || !strings.Contains(body, "never fetched through redirects") {
			t.Errorf("%s: %d Location=%q, want a 400 page that names the redirect:\n%s", name, rec.Code, rec.Header().Get("Location"), body)
		}
		if strings.Contains(body, "Doc Client") {
			t.Errorf("%s: the consent page shows the document reached through the redirect", name)
		}
	}
	if n := targetFetches.Load(); n != 0 {
		t.Errorf("the redirect's target was fetched %d times", n)
	}
	if n := f.clientRows(); n != 0 {
		t.Errorf("%d clients stored from documents behind redirects", n)
	}
}

// A metadata document must be served as JSON (application/json or an
// application/*+json type): any other content type is an error the person
// is shown, and nothing is stored.
func TestOAuthMetadataDocumentMustBeJSON(t *testing.T) {
	f, srv := cimdFixture(t, func(w http.ResponseWriter, r *http.Request) {
		ct := strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/client.json"), "/")
		if ct == "none" {
			w.Header()["Content-Type"] = nil // no header, and no sniffing either
			ct = ""
		}
		writeDocument(w, r, ct)
	})
	for _, tc := range []struct {
		contentType string
		ok          bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"application/vnd.example+json", true},
		{"text/plain", false},
		{"text/html; charset=utf-8", false},
		{"text/json", false},
		{"application/octet-stream", false},
		{"none", false},
	} {
		clientID := srv.URL + "/" + url.PathEscape(tc.contentType) + "/client.json"
		rec, _ := f.authorize(authParams(clientID, "http://127.0.0.1/callback"), f.cookie, "")
		body := rec.Body.String()
		switch {
		case tc.ok && (rec.Code != http.StatusOK || !strings.Contains(body, "Doc Client")):
			t.Errorf("%s: %d, want the consent page:\n%s", tc.contentType, rec.Code, body)
		case !tc.ok && (rec.Code != http.StatusBadRequest || !strings.Contains(body, "must be served as application/json")):
			t.Errorf("%s: %d, want a 400 page that names the content type:\n%s", tc.contentType, rec.Code, body)
		}
	}
	if n := f.clientRows(); n != 3 {
		t.Errorf("%d clients stored, want the 3 served as JSON", n)
	}
}

// A signed-out visitor is sent to sign-in before the client is looked at:
// no metadata document is fetched and nothing is stored until a member of
// the organisation asks, and return_to resumes the same request.
func TestOAuthAuthorizeSignedOutFetchesNothing(t *testing.T) {
	var fetches atomic.Int32
	f, srv := cimdFixture(t, func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		writeDocument(w, r, "application/json")
	})
	p := authParams(srv.URL+"/client.json", "http://127.0.0.1/callback")
	for i := 0; i < 3; i++ {
		p.Set("client_id", srv.URL+"/"+strings.Repeat("c", i+1)+"/client.json")
		rec, _ := f.authorize(p, nil, "")
		want := "/t/acme/login?return_to=" + url.QueryEscape("/t/acme/oauth/authorize?"+p.Encode())
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != want {
			t.Fatalf("signed out: %d %q, want the sign-in that resumes the request", rec.Code, rec.Header().Get("Location"))
		}
	}
	if n, rows := fetches.Load(), f.clientRows(); n != 0 || rows != 0 {
		t.Fatalf("signed-out requests caused %d fetches and stored %d clients", n, rows)
	}
	// Signed in, the same request fetches the document and asks for consent.
	if rec, _ := f.authorize(p, f.cookie, ""); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Doc Client") || fetches.Load() != 1 {
		t.Fatalf("signed in: %d, %d fetches", rec.Code, fetches.Load())
	}
}

// The authorization endpoint is rate-limited per address like sign-in
// starts (Limits.Authorize, OAUTH_AUTHORIZE_RATE_PER_IP): past the limit a
// 429 page with Retry-After, before anything is read or fetched; other
// addresses are not affected.
func TestOAuthAuthorizeRateLimit(t *testing.T) {
	var fetches atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Cache-Control", "no-store")
		writeDocument(w, r, "application/json")
	}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	f := newOAuthFixture(t, func(c *Config) {
		c.Limiter = ratelimit.NewMemory()
		c.Limits.Authorize = ratelimit.Rule{Limit: 3, Period: time.Hour}
		c.OAuth.MetadataClient = safehttp.NewClient(safehttp.Options{RootCAs: pool, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	})
	p := authParams(srv.URL+"/client.json", "http://127.0.0.1/callback")
	get := func(addr string, cookie *http.Cookie) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/t/acme/oauth/authorize?"+p.Encode(), nil)
		req.RemoteAddr = addr
		if cookie != nil {
			req.AddCookie(cookie)
		}
		return f.do(req)
	}
	const addr = "198.51.100.7:4000"
	// Signed-out and signed-in requests count alike.
	for i, cookie := range []*http.Cookie{nil, f.cookie, f.cookie} {
		if rec := get(addr, cookie); rec.Code == http.StatusTooManyRequests {
			t.Fatalf("request %d refused within the limit", i+1)
		}
	}
	before := fetches.Load()
	for _, cookie := range []*http.Cookie{nil, f.cookie} {
		rec := get(addr, cookie)
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "Too many authorization requests") {
			t.Fatalf("past the limit: %d Retry-After=%q", rec.Code, rec.Header().Get("Retry-After"))
		}
	}
	if fetches.Load() != before {
		t.Fatalf("a refused request fetched the metadata document")
	}
	// The consent form counts too: it resolves the client again.
	form := url.Values{"decision": {"approve"}}
	for k, v := range p {
		form[k] = v
	}
	post := httptest.NewRequest(http.MethodPost, "/t/acme/oauth/authorize", strings.NewReader(form.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.Header.Set("Sec-Fetch-Site", "same-origin")
	post.RemoteAddr = addr
	post.AddCookie(f.cookie)
	if rec := f.do(post); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("consent POST past the limit: %d", rec.Code)
	}
	if rec := get("198.51.100.8:4000", f.cookie); rec.Code != http.StatusOK {
		t.Fatalf("another address: %d", rec.Code)
	}
}

// Stored metadata documents that nothing refers to are deleted once they
// are older than the longest cache (oauth.MetadataUnusedTTL), when the
// next document is stored; those with a grant or a code stay.
func TestOAuthStaleMetadataClientsAreSwept(t *testing.T) {
	f, srv := cimdFixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		writeDocument(w, r, "application/json")
	})
	const redirect = "http://127.0.0.1/callback"
	doc := func(name string) string { return srv.URL + "/" + name + "/client.json" }
	// Seen only: a consent page shown, never answered.
	for _, name := range []string{"seen1", "seen2"} {
		if rec, _ := f.authorize(authParams(doc(name), redirect), f.cookie, ""); rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", name, rec.Code)
		}
	}
	// A code given, not exchanged yet.
	if _, q := f.authorize(authParams(doc("coded"), redirect), f.cookie, "approve"); q.Get("code") == "" {
		t.Fatal("no code")
	}
	// Connected: a grant.
	_, q := f.authorize(authParams(doc("granted"), redirect), f.cookie, "approve")
	if a := f.token(codeForm(doc("granted"), q.Get("code"), redirect, verifier)); a.Status != 200 {
		t.Fatalf("token: %+v", a)
	}
	// A day and more later, one more document is stored.
	f.exec(`UPDATE oauth_clients SET created_at = created_at - interval '25 hours', fetched_at = fetched_at - interval '25 hours',
		last_used_at = last_used_at - interval '25 hours' WHERE tenant_id = $1`)
	if rec, _ := f.authorize(authParams(doc("new"), redirect), f.cookie, ""); rec.Code != http.StatusOK {
		t.Fatalf("new: %d", rec.Code)
	}
	rows, err := f.env.Admin.Pool.Query(context.Background(), `SELECT client_id FROM oauth_clients WHERE tenant_id = $1 ORDER BY client_id`, f.m.TenantID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimSuffix(strings.TrimPrefix(id, srv.URL+"/"), "/client.json"))
	}
	if strings.Join(got, ",") != "coded,granted,new" {
		t.Fatalf("stored clients after the sweep: %v, want coded,granted,new", got)
	}
	// A swept document is fetched again when it is next used.
	if rec, _ := f.authorize(authParams(doc("seen1"), redirect), f.cookie, ""); rec.Code != http.StatusOK {
		t.Fatalf("seen1 again: %d", rec.Code)
	}
}
