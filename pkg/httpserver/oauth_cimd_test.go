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
